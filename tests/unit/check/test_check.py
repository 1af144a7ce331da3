"""The check end to end on simulated versions (a fake executor: no servers): a planted
slowdown fails, identical versions pass, a change at the limit within a small budget is
inconclusive; and the stopping rule measures until the thresholds are decided."""

from __future__ import annotations

import contextlib
import random

import pytest
from support import simulated_check

import servelab.launch
from servelab.analysis.thresholds import exit_code, overall
from servelab.check import (
    CANDIDATE,
    CheckSpec,
    check_experiment,
    probe_both,
)
from servelab.config.stack import AppSpec
from servelab.errors import StackStartError

THRESHOLDS = ("rps < -5%", "errors > 0")


def simulate(effect: float, *, noise: float = 0.01, budget_s: float = 180.0, seed: int = 0,
             thresholds: tuple[str, ...] = THRESHOLDS):
    """Run the check's own experiment with the candidate ``effect`` slower (-0.1 = 10 %)."""
    rng = random.Random(seed)
    starts: dict[int, float] = {}

    def level(variant, start, tick, workload):
        if start not in starts:
            starts[start] = rng.gauss(0, noise)
        drift = 1 + 0.05 * ((tick // 7) % 2)  # the machine's own speed, shared alike
        return 1000.0 * drift * (1 + (effect if variant == CANDIDATE else 0.0)) * (
            1 + starts[start] + rng.gauss(0, noise / 4)
        )

    judgements, starts_each, outlook, _ = simulated_check(
        level, thresholds=thresholds, budget_s=budget_s
    )
    return overall(judgements), judgements, starts_each, outlook


def test_a_planted_ten_percent_slowdown_fails() -> None:
    state, judgements, _, outlook = simulate(-0.10)
    assert state == "crossed" and exit_code(state) == 1
    assert judgements[0].state == "crossed" and judgements[0].observed < -5
    assert outlook.reason.startswith("a threshold is crossed (rps, candidate)")


def test_a_crossed_threshold_ends_the_check_without_waiting_for_the_others() -> None:
    # The simulated stacks report no latency: p99's threshold can never be decided, so
    # without stopping at the crossing the check would measure until its budget.
    state, judgements, _, outlook = simulate(-0.10, thresholds=("rps < -5%", "p99 > +400%"))
    assert state == "crossed"
    assert [j.state for j in judgements] == ["crossed", "inconclusive"]
    assert outlook.reason.startswith("a threshold is crossed (rps, candidate)")


def test_identical_versions_pass() -> None:
    state, judgements, _, _ = simulate(0.0)
    assert state == "held" and exit_code(state) == 0
    assert [j.state for j in judgements] == ["held", "held"]


def test_more_cpu_per_request_fails_on_requests_per_cpu_second_where_requests_s_holds(
) -> None:
    """In turns, a candidate that costs 10 % more CPU per request of a stack that leaves
    its CPU idle part of the time serves as many requests/s: `rps` holds, `rps_per_cpu`
    (compared in turns only when a threshold is on it) is crossed."""
    rng = random.Random(3)

    def level(variant, start, tick, workload):
        return 1000.0 * (1 + rng.gauss(0, 0.01))

    def busy(variant, workload):
        return 0.88 if variant == CANDIDATE else 0.8

    judgements, _, _, _ = simulated_check(
        level, thresholds=("rps < -5%", "rps_per_cpu < -5%"), side_by_side=False, busy=busy
    )
    held, crossed = judgements
    assert (held.threshold.metric, held.state) == ("rps", "held")
    assert (crossed.threshold.metric, crossed.state) == ("rps_per_cpu", "crossed")
    assert crossed.observed == pytest.approx(-9.1, abs=1.0)
    from servelab.analysis.metrics import compared_metrics

    def compared(*thresholds: str) -> set[str]:
        spec = CheckSpec(app=AppSpec(ref="fastapi"), thresholds=thresholds)
        return {m.key for m in compared_metrics(check_experiment(spec, None, side_by_side=False))}

    assert "rps_per_cpu" in compared("rps_per_cpu < -5%")
    assert "rps_per_cpu" not in compared("rps < -5%")  # in turns, nothing asks for it


def test_a_change_at_the_limit_stays_inconclusive_within_the_budget() -> None:
    state, judgements, starts_each, outlook = simulate(-0.05, noise=0.06, budget_s=30)
    assert state == "inconclusive"
    assert exit_code(state) == 10 and exit_code(state, "pass") == 0
    assert "budget" in outlook.reason
    assert judgements[0].interval_pct[0] < -5 < judgements[0].interval_pct[1]
    assert starts_each >= 2


def test_the_check_compares_the_two_versions_side_by_side_on_one_stack() -> None:
    experiment = check_experiment(
        CheckSpec(app=AppSpec(ref="shop:app", app_dir="/src/new"), thresholds=THRESHOLDS),
        baseline_dir="/tmp/old",
    )
    baseline, candidate = experiment.stacks
    assert (baseline.name, candidate.name) == ("baseline", "candidate")
    assert str(baseline.app.app_dir) == "/tmp/old" and str(candidate.app.app_dir) == "/src/new"
    assert baseline.server == candidate.server and baseline.proxy == candidate.proxy
    assert experiment.side_by_side and experiment.stopping.thresholds == THRESHOLDS


def test_over_many_machines_identical_versions_never_fail_and_a_slowdown_never_passes():
    """20 simulated machines (3 % noise between starts, a shared drift): the decision is
    right every time, not just on one lucky seed."""
    for seed in range(20):
        assert simulate(0.0, noise=0.03, seed=seed)[0] == "held", seed
        assert simulate(-0.10, noise=0.03, seed=seed)[0] == "crossed", seed


def test_a_version_that_does_not_start_is_named_with_its_log(monkeypatch) -> None:
    @contextlib.contextmanager
    def launch_stack(stack, **_kwargs):
        if stack.name == CANDIDATE:
            raise StackStartError("gunicorn exited", "fix the app", detail="the log tail")
        yield

    monkeypatch.setattr(servelab.launch, "launch_stack", launch_stack)
    experiment = check_experiment(CheckSpec(app=AppSpec(ref="fastapi"), thresholds=THRESHOLDS),
                                  None)
    with pytest.raises(StackStartError, match="the candidate version: gunicorn exited") as info:
        probe_both(experiment, timeout_s=1.0)
    assert (info.value.fix, info.value.detail) == ("fix the app", "the log tail")


def test_a_candidate_whose_app_does_not_import_is_a_version_that_does_not_start(
    tmp_path,
) -> None:
    """Where the baseline's app imports, the candidate's failing to is the candidate not
    starting (bisect skips such a commit); the baseline's failing is the user's --app
    (a SpecError, exit 2), before the candidate is looked at."""
    from servelab.check import VersionDidNotStart, _fitted
    from servelab.errors import SpecError

    good, broken = tmp_path / "good", tmp_path / "broken"
    for where, head in ((good, ""), (broken, "raise RuntimeError('half-done change')\n")):
        where.mkdir()
        (where / "shop.py").write_text(
            head + "def app(environ, start_response):\n"
            "    start_response('200 OK', [])\n    return [b'ok']\n")

    def fitted(candidate_dir, baseline_dir):
        spec = CheckSpec(app=AppSpec(ref="shop:app", app_dir=str(candidate_dir)),
                         thresholds=THRESHOLDS)
        return _fitted(check_experiment(spec, baseline_dir), lambda note: None)

    with pytest.raises(VersionDidNotStart, match=r"the candidate version: .*half-done") as info:
        fitted(broken, good)
    assert info.value.version == CANDIDATE and info.value.exit_code == 4
    with pytest.raises(SpecError, match="half-done") as refused:
        fitted(good, broken)
    assert not isinstance(refused.value, VersionDidNotStart)
    assert {s.name for s in fitted(good, good).stacks} == {"baseline", CANDIDATE}


def _profiled_runs(tmp_path):
    """Two starts of each version with folded stacks on disk: the candidate's worker
    spends 200 µs/request more, all in slow_path()."""
    from support import fake_load, fake_run

    from servelab.results.profiles import write_profile
    from servelab.results.records import ProcessUsage, ProfileInfo

    runs = []
    for name, extra_s in (("baseline", 0.0), (CANDIDATE, 0.2)):
        for start in (1, 2):
            relative = f"profiles/{name}/app/start-{start}.folded"
            stacks = {"app workers;handle (app.py:3)": 100}
            if extra_s:
                stacks["app workers;handle (app.py:3);slow_path (app.py:9)"] = 40
            write_profile(tmp_path, relative, stacks)
            worker = ProcessUsage(role="app", pid=11, name="w", cpu_s=0.5 + extra_s,
                                  peak_rss_bytes=0)
            master = ProcessUsage(role="app", pid=10, name="m", cpu_s=0.0, peak_rss_bytes=0)
            runs.append(fake_run(
                name, "app", start, load=fake_load(requests=1000), processes=(master, worker),
                profile=ProfileInfo(file=relative, samples=100, rate_hz=100, masters=(10,)),
            ))
    return runs


def test_a_crossed_check_draws_the_candidates_differential_flame_graph(tmp_path) -> None:
    from servelab.check import why_candidate

    runs = _profiled_runs(tmp_path)
    lines, svg = why_candidate(runs, tmp_path, draw=True)
    assert lines[0].startswith("candidate vs baseline (app): stack CPU 700.0 vs 500.0")
    assert any("in slow_path (app.py)" in line for line in lines)
    assert svg is not None and svg.startswith("<svg") and "slow_path" in svg
    assert why_candidate(runs, tmp_path, draw=False) == (lines, None)
    assert why_candidate(runs[:2], tmp_path, draw=True) == ([], None)  # baseline only


def test_the_run_options_are_applied_once_before_either_version_starts(monkeypatch, tmp_path):
    """run_check prepares the experiment (api.prepare: the run's options, the versions'
    servers fitted, checked) and measures that; it once applied the options itself and
    api.run applied them again."""
    import servelab.check as check
    import servelab.prepare.run as run_steps
    from servelab.check import run_check
    from servelab.config.run import RunOptions

    applied, probed = [], []
    real = run_steps.with_stopping
    monkeypatch.setattr(
        run_steps, "with_stopping", lambda e, *a: applied.append(a) or real(e, *a)
    )
    monkeypatch.setattr(check, "probe_both", lambda e, timeout_s: probed.append(e))

    class Measured(Exception):
        pass

    def measure(ready):
        raise Measured(ready)

    options = RunOptions(precision_pct=3.0, side_by_side=False, results_dir=tmp_path)
    with pytest.raises(Measured) as stopped:
        run_check(CheckSpec(app=AppSpec(ref="fastapi")), options, say=lambda note: None,
                  measure=measure)
    ready = stopped.value.args[0]
    assert len(applied) == 1
    assert probed == [ready.experiment]
    assert ready.experiment.stopping.precision_pct == 3.0 and not ready.experiment.side_by_side
    assert ready.options is options


def test_an_obvious_change_is_decided_before_the_interval_has_six_degrees_of_freedom() -> None:
    # Haybittle-Peto's 99.9 % interval pays for its few df in its t quantile (12.9 on 3):
    # a halving is crossed, and identical quiet versions held, after a few rounds; with
    # a floor of 6 df (stats.MIN_CLEAR_DF) both took 7 starts of each version.
    state, _, starts_each, outlook = simulate(-0.5)
    assert state == "crossed" and starts_each <= 4, (starts_each, outlook)
    state, _, starts_each, outlook = simulate(0.0, noise=0.002)
    assert state == "held" and starts_each <= 4, (starts_each, outlook)
    assert outlook.reason == "every threshold is decided"
