"""Ramp planning and verdicts, bounded loads, somaxconn and namespace fallbacks, ss parsing."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import fake_load, fake_run

from servelab.config.building import experiment_from_dict
from servelab.config.load import SloSpec
from servelab.errors import SpecError
from servelab.host import netns
from servelab.host.netns import NamespaceError, check_somaxconn, network_namespace, place_stack
from servelab.measure.ramp import (
    RampOptions,
    RampPlan,
    build_ramp,
    ramp_should_stop,
    ramp_verdicts,
    slo_problem,
)
from servelab.observe.acceptq import parse_ss
from servelab.results.records import RunRecord
from servelab.studies import StudyOptions, get_study
from servelab.studies.failures import backlog_estimate_s


def step(rate: float, *, p99: float = 10.0, codes: dict[str, int] | None = None,
         variant: str = "v", repetition: int = 1) -> RunRecord:
    codes = codes if codes is not None else {"200": 100}
    load = fake_load(rps=rate, duration_s=1.0, mean_ms=p99 / 2, p99_ms=p99, codes=codes)
    return fake_run(variant, f"rate-{rate:g}", repetition, experiment="ramp", load=load)


def test_rates_additive_multiplicative_and_capped() -> None:
    assert RampPlan(start=50, stop=200, step=50).rates() == [50, 100, 150, 200]
    assert RampPlan(start=10, stop=100, factor=2).rates() == [10, 20, 40, 80, 100]
    assert RampPlan(start=50, stop=120, step=50).rates() == [50, 100, 120]


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (RampPlan(start=0, stop=10, step=1), "start rate must be positive"),
        (RampPlan(start=-5, stop=10, step=1), "start rate must be positive"),
        (RampPlan(start=20, stop=10, step=1), "below the start rate"),
        (RampPlan(start=1, stop=10, step=0), "step must be positive"),
        (RampPlan(start=1, stop=10, factor=1.0), "factor must be above 1"),
        (RampPlan(start=1, stop=10, step=1, step_s=-2), "step duration"),
        (RampPlan(start=1, stop=10, step=1, step_s=10_000), "step duration"),
        (RampPlan(start=1, stop=10_000, step=1), "steps, more than 40"),
        (RampPlan(start=1e8, stop=1e9, factor=2), "more than 10,000,000"),
        (RampPlan(start=1, stop=10, step=1, timeout_s=0), "timeout must be positive"),
    ],
)
def test_bad_ramps_are_one_line_errors(plan: RampPlan, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        plan.rates()
    assert message in caught.value.one_line()
    assert "\n" not in caught.value.one_line()


def test_every_step_is_bounded_in_count_and_time() -> None:
    plan = RampPlan(start=100, stop=300, step=100, step_s=4, timeout_s=7)
    load = plan.load(300)
    assert (load.model, load.rate, load.requests) == ("open", 300, 1200)
    assert load.max_time_s == 4 + 7 + 5


def test_slo_problem_names_what_broke() -> None:
    slo = SloSpec(p99_ms=100, max_error_ratio=0.05)
    assert slo_problem(step(10, p99=50), slo) is None
    assert "p99" in (slo_problem(step(10, p99=150), slo) or "")
    assert "error ratio 10.0%" in (slo_problem(step(10, codes={"200": 90, "502": 10}), slo) or "")


def test_ramp_goes_past_the_break_to_find_the_first_502() -> None:
    slo = SloSpec(p99_ms=100, extra_steps=2)
    runs = [step(50), step(100, p99=200)]
    assert ramp_should_stop(runs, "v", 1, slo)  is False  # broke, no 502 yet: go on
    runs.append(step(150, p99=300))
    assert not ramp_should_stop(runs, "v", 1, slo)
    runs.append(step(200, p99=300, codes={"200": 90, "502": 10}))
    assert ramp_should_stop(runs, "v", 1, slo)  # the first 502 was found
    assert not ramp_should_stop(runs, "other", 1, slo)  # another variant's own ramp
    assert not ramp_should_stop(runs, "v", 1, None)  # not a ramp
    verdict = ramp_verdicts(runs, slo)[0]
    assert (verdict.sustainable_rate, verdict.broke_at, verdict.first_502_rate) == (50, 100, 200)
    assert "highest sustainable rate 50 req/s" in verdict.summary()


def test_ramp_stops_after_extra_steps_without_a_502() -> None:
    slo = SloSpec(p99_ms=100, extra_steps=1)
    runs = [step(50, p99=200), step(100, p99=300)]
    assert ramp_should_stop(runs, "v", 1, slo)
    verdict = ramp_verdicts(runs, slo)[0]
    assert verdict.sustainable_rate is None and verdict.first_502_rate is None


def test_build_ramp_is_an_experiment_with_an_slo_and_no_warmup() -> None:
    experiment = build_ramp(RampOptions(plan=RampPlan(start=10, stop=30, step=10), somaxconn=64))
    assert [w.name for w in experiment.workloads] == ["rate-10", "rate-20", "rate-30"]
    assert experiment.slo is not None and experiment.warmup.requests == 0
    assert experiment.baseline.network.somaxconn == 64
    assert experiment.baseline.server.worker_class == "sync"


@pytest.mark.parametrize(
    ("load", "message"),
    [
        ({"model": "open", "rate": 0, "requests": 10}, "greater than 0"),
        ({"model": "open", "rate": -1, "requests": 10}, "greater than 0"),
        ({"model": "open", "rate": 10, "duration_s": -1}, "greater than 0"),
        ({"model": "open", "rate": 1e9, "duration_s": 500}, "more than 10,000,000"),
        ({"model": "open", "rate": 1, "requests": 10_000}, "take 10,000 s to send"),
        ({"requests": 10, "max_time_s": 7200}, "less than or equal to 3600"),
        ({"model": "bursts", "requests": 10}, "needs burst_size and burst_gap_s"),
        ({"burst_size": 5, "requests": 10}, "belong to model = 'bursts'"),
        (
            {"model": "bursts", "burst_size": 1, "burst_gap_s": 10, "requests": 100},
            "take 1,000 s",
        ),
    ],
)
def test_unbounded_or_negative_loads_are_refused(load: dict, message: str) -> None:
    data = {
        "name": "x",
        "baseline": {},
        "workloads": [{"name": "w", "load": load}],
    }
    with pytest.raises(SpecError) as caught:
        experiment_from_dict(data)
    assert message in caught.value.one_line()


def test_knob_errors_for_recycling_and_somaxconn() -> None:
    base = {"name": "x", "workloads": [{"name": "w"}]}
    with pytest.raises(SpecError, match="max_requests_jitter needs max_requests"):
        experiment_from_dict({**base, "baseline": {"server": {"max_requests_jitter": 5}}})
    with pytest.raises(SpecError, match=r"network\.somaxconn"):
        experiment_from_dict({**base, "baseline": {"network": {"somaxconn": 0}}})
    with pytest.raises(SpecError, match="out of range"):
        check_somaxconn(70_000)
    assert check_somaxconn(128) == 128


def test_failure_studies_build_and_reject_bad_options() -> None:
    backlog = get_study("backlog").build(StudyOptions())
    names = [s.name for s in backlog.stacks]
    assert names == ["unix-somaxconn-128", "unix-somaxconn-1024", "tcp-somaxconn-128-timeout-5s"]
    load = backlog.workloads[0].load
    assert (load.model, load.rate, load.requests, load.concurrency) == ("open", 200, 200, 200)
    assert backlog.stacks[0].app.env == {"SERVELAB_SLEEP_S": "2"}
    assert 10 * 60 < backlog_estimate_s(StudyOptions()) < 13 * 60
    for name in ("keepalive-mismatch", "worker-recycling", "capacity"):
        assert get_study(name).build(StudyOptions()).workloads
    with pytest.raises(SpecError, match="--sleep must be a positive"):
        get_study("backlog").build(StudyOptions(sleep_s=-1))
    with pytest.raises(SpecError, match="out of range"):
        get_study("backlog").build(StudyOptions(somaxconn=(128, 999_999)))


def test_parse_ss_finds_the_listening_socket() -> None:
    unix = "u_str LISTEN 3      7      /tmp/x.sock 1580765 * 0\nu_str LISTEN 0 5 /other 1 * 0\n"
    assert parse_ss(unix, Path("/tmp/x.sock")) == (3, 7)
    assert parse_ss(unix, Path("/tmp/none.sock")) is None
    tcp = "LISTEN 129    128    127.0.0.1:5555 0.0.0.0:*\n"
    assert parse_ss(tcp, ("127.0.0.1", 5555)) == (129, 128)
    assert parse_ss(tcp, ("127.0.0.1", 555)) is None


def test_without_root_somaxconn_falls_back_to_the_backlog(monkeypatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert "needs root" in (netns.unavailable_reason() or "")
    with place_stack(128, "auto") as placement:
        assert placement.namespace is None and placement.backlog_cap == 128
        assert "needs root" in placement.note
        assert "capping the app server's backlog" in placement.note
    with pytest.raises(NamespaceError, match="needs root") as caught, place_stack(128, "require"):
        pass
    assert "--netns off" in caught.value.fix
    with pytest.raises(NamespaceError), network_namespace(128):
        pass


def test_namespace_off_never_creates_one() -> None:
    with place_stack(64, "off") as placement:
        assert placement.namespace is None and placement.backlog_cap == 64
        assert "namespace = 'off'" in placement.note
    with place_stack(None, "auto") as placement:
        assert placement.namespace is None and placement.backlog_cap is None
        assert placement.note == ""
