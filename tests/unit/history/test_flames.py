"""A change point's differential flame graph: the stored check nearest the change that
spans it, drawn from its profiles, written beside the history page and linked from its
change point; none without a profiled check across the change."""

from __future__ import annotations

import math
import random
from pathlib import Path

from support import fake_load, fake_run, run_cli

from servelab.check import CheckSpec, check_experiment
from servelab.config.stack import AppSpec
from servelab.history.flames import nearest_check
from servelab.history.series import METRICS, Point, build_series
from servelab.results.records import ProcessUsage, ProfileInfo
from servelab.results.store import ResultStore

MACHINE = {"hostname": "ci-1", "cpu_model": "x", "cpu_count": 4, "kernel": "6.1"}
COMMITS = [f"{i:02d}" * 20 for i in range(12)]
STEP_AT = 7  # from this commit on, serialize() costs 300 µs more a request


def _store_check(root: Path, candidate: int, baseline: int, rng: random.Random,
                 profiled: bool) -> int:
    experiment = check_experiment(CheckSpec(app=AppSpec(ref="shop:app")), None)
    versions = {
        role: {"commit": COMMITS[i], "time": f"2026-11-{1 + i:02d}T00:00:00+00:00",
               "dirty": False, "dir": "/w"}
        for role, i in (("candidate", candidate), ("baseline", baseline))
    }
    store = ResultStore.create(root, experiment, {**MACHINE, "app_versions": versions})
    for role, i in (("candidate", candidate), ("baseline", baseline)):
        slow = i >= STEP_AT
        for repetition in (1, 2, 3):
            rps = 1000 / (1.3 if slow else 1.0) * math.exp(rng.gauss(0, 0.02))
            profile = None
            if profiled:
                relative = f"profiles/{role}-{repetition}.folded"
                store.write_profile(relative, {
                    "app;handle (shop.py:3);route (shop.py:9)": 70,
                    "app;handle (shop.py:3);serialize (shop.py:20)": 90 if slow else 30,
                })
                profile = ProfileInfo(file=relative, samples=100, rate_hz=100, masters=())
            busy = ProcessUsage(role="app", pid=1, name="gunicorn", cpu_s=5000 / rps,
                                peak_rss_bytes=1)
            store.add(fake_run(role, "app", repetition, experiment="check",
                               load=fake_load(rps=rps, requests=5000), processes=(busy,),
                               profile=profile))
    store.mark_finished()
    assert store.id is not None
    return store.id


def test_the_nearest_check_that_spans_the_change() -> None:
    points = [
        Point(COMMITS[c], f"2026-11-{1 + c:02d}", 1.0, check, role)
        for check, pairs in {1: ((3, "baseline"), (8, "candidate")),
                             2: ((6, "baseline"), (7, "candidate")),
                             3: ((7, "baseline"), (9, "candidate")),
                             4: ((2, "baseline"), (5, "candidate"))}.items()
        for c, role in pairs
    ]
    series = build_series("m", "app", METRICS["rps"], points, 0.2)
    at = [level.commit for level in series.commits].index(COMMITS[STEP_AT])
    assert nearest_check(series, points, at) == 2  # 6 -> 7, the commits on either side
    assert nearest_check(series, [p for p in points if p.check_id != 2], at) == 1
    assert nearest_check(series, [p for p in points if p.check_id in (3, 4)], at) is None


def test_the_change_point_links_the_flame_graph_of_the_profiled_check_across_it(
    tmp_path: Path,
) -> None:
    rng = random.Random(3)
    root = tmp_path / "results"
    across = None
    for i in range(1, len(COMMITS)):  # CI: each commit checked against its parent
        check = _store_check(root, i, i - 1, rng, profiled=i in (STEP_AT, STEP_AT + 2))
        across = check if i == STEP_AT else across
    for i in (2, 4, 9):  # reruns: the noise band
        _store_check(root, i, i - 1, rng, profiled=False)
    done = run_cli("history", "--results", str(root), "--out", str(tmp_path / "h"),
                   "--metric", "rps")
    assert done.returncode == 0, done.stderr
    flame = tmp_path / "h" / f"flame-check-{across}.svg"
    svg = flame.read_text()
    assert "serialize (shop.py:20)" in svg and "<svg" in svg
    assert sorted(p.name for p in (tmp_path / "h").glob("flame-*")) == [flame.name]
    markdown = (tmp_path / "h" / "history.md").read_text()
    [row] = [line for line in markdown.splitlines() if f"`{COMMITS[STEP_AT][:10]}`" in line
             and line.startswith("| `")]
    assert f"[{flame.name}]({flame.name})" in row
    page = (tmp_path / "h" / "history.html").read_text()
    assert f'<a href="{flame.name}">' in page


def test_no_flame_graph_without_a_profiled_check_across_the_change(tmp_path: Path) -> None:
    rng = random.Random(4)
    root = tmp_path / "results"
    for i in range(1, len(COMMITS)):
        _store_check(root, i, i - 1, rng, profiled=i == STEP_AT + 2)  # not across it
    for i in (2, 4, 9):
        _store_check(root, i, i - 1, rng, profiled=False)
    done = run_cli("history", "--results", str(root), "--out", str(tmp_path / "h"),
                   "--metric", "rps")
    assert done.returncode == 0, done.stderr
    assert "| at commit |" in (tmp_path / "h" / "history.md").read_text()  # a change found
    assert not list((tmp_path / "h").glob("flame-*")) and "<a href" not in (
        tmp_path / "h" / "history.html").read_text()
