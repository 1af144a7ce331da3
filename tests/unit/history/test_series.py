"""The history from stored checks: each check's two versions give a figure of their
commits, reruns of one commit give the noise band, a step of the app's speed comes out as
a change point at its commit; other machines are other series; the page is written."""

from __future__ import annotations

import math
import random
from pathlib import Path

from support import fake_load, fake_run, run_cli

from servelab.check import CheckSpec, check_experiment
from servelab.config.stack import AppSpec
from servelab.history.series import METRICS, build_series, read_points
from servelab.results.records import ProcessUsage
from servelab.results.store import ResultStore

MACHINE = {"hostname": "ci-1", "cpu_model": "x", "cpu_count": 4, "kernel": "6.1"}
COMMITS = [f"{i:02d}" * 20 for i in range(16)]  # 40 hex-ish characters each
STEP_AT = 9  # from this commit on, every request costs 15 % more (rps 1 / 1.15)


def _store_check(root: Path, candidate: int, baseline: int, rng: random.Random,
                 machine: dict[str, object] = MACHINE, finished: bool = True) -> None:
    experiment = check_experiment(CheckSpec(app=AppSpec(ref="shop:app")), None)
    versions = {
        role: {"commit": COMMITS[i], "time": f"2026-11-{1 + i:02d}T00:00:00+00:00",
               "dirty": False, "dir": "/w"}
        for role, i in (("candidate", candidate), ("baseline", baseline))
    }
    store = ResultStore.create(root, experiment, {**machine, "app_versions": versions})
    for role, i in (("candidate", candidate), ("baseline", baseline)):
        level = 1000 / (1.15 if i >= STEP_AT else 1.0)
        for repetition in (1, 2, 3):
            rps = level * math.exp(rng.gauss(0, 0.02))
            busy = ProcessUsage(role="app", pid=1, name="gunicorn", cpu_s=5000 / rps,
                                peak_rss_bytes=1)
            store.add(fake_run(role, "app", repetition, experiment="check",
                               load=fake_load(rps=rps, requests=5000), processes=(busy,)))
    if finished:
        store.mark_finished()


def test_a_step_comes_out_at_its_commit(tmp_path: Path) -> None:
    rng = random.Random(5)
    root = tmp_path / "results"
    for i in range(1, len(COMMITS)):  # CI: each commit checked against its parent
        _store_check(root, i, i - 1, rng)
    _store_check(root, 5, 4, rng, finished=False)  # stopped: not in the history
    _store_check(root, 5, 4, rng, machine={**MACHINE, "hostname": "laptop"})
    points = read_points(root, METRICS["rps"])
    assert set(points) == {
        ("ci-1, x, 4, 6.1", "app"), ("laptop, x, 4, 6.1", "app"),
    }
    series = build_series("ci-1", "app", METRICS["rps"], points[("ci-1, x, 4, 6.1", "app")], 0.2)
    assert [c.commit for c in series.commits] == COMMITS
    assert all(len(c.values) == 2 for c in series.commits[1:-1])  # candidate, then baseline
    assert series.noise_sd is not None and 0.003 < series.noise_sd < 0.05
    [change] = series.changes
    assert change.index == STEP_AT
    low, high = change.interval_pct
    assert low <= 100 * (1 / 1.15 - 1) <= high


def test_the_page_and_its_summary(tmp_path: Path) -> None:
    rng = random.Random(6)
    root = tmp_path / "results"
    for i in range(1, len(COMMITS)):
        _store_check(root, i, i - 1, rng)
    done = run_cli("history", "--results", str(root), "--out", str(tmp_path / "h"),
                   "--known", f"{COMMITS[STEP_AT][:8]}=new serializer")
    assert done.returncode == 0, done.stderr
    markdown = (tmp_path / "h" / "history.md").read_text()
    assert "## Requests per second, app, on ci-1" in markdown
    assert f"| `{COMMITS[STEP_AT][:10]}` |" in markdown and "new serializer" in markdown
    page = (tmp_path / "h" / "history.html").read_text()
    assert page.count("<svg") == 2 and "<script" not in page  # requests/s, CPU per request
    assert "## Requests per CPU second, app, on ci-1" in markdown
    assert "known: new serializer" in page


def test_bad_history_input_is_one_line(tmp_path: Path) -> None:
    for args, said in (
        (["--results", str(tmp_path)], "no servelab results in"),
        (["--known", "nothing"], "is not REV=REASON"),
        (["--false-alarms", "0"], "--false-alarms must be between 0 and 50"),
    ):
        done = run_cli("history", *args, cwd=tmp_path)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_a_check_of_one_code_in_two_environments_is_no_point_of_the_history(
    tmp_path: Path,
) -> None:
    experiment = check_experiment(CheckSpec(app=AppSpec(ref="shop:app")), None)
    versions = {  # bisect --lock-good: the same commit, two lock states' environments
        role: {"commit": COMMITS[3], "time": "2026-11-04T00:00:00+00:00", "dirty": False,
               "dir": "/w", "python": f"/tmp/servelab-lock-x/state-{i}/bin/python"}
        for i, role in enumerate(("baseline", "candidate"))
    }
    store = ResultStore.create(tmp_path, experiment, {**MACHINE, "app_versions": versions})
    for role in ("candidate", "baseline"):
        store.add(fake_run(role, "app", 1, experiment="check", load=fake_load(rps=900)))
    store.mark_finished()
    assert read_points(tmp_path, METRICS["rps"]) == {}
