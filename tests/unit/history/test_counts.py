"""The history of instruction counts (checks on `--fail-if instructions`): each count a
point of its commit, a step of the code's work a change point at its commit and nowhere
else, counts reused from an earlier check and damaged files left out."""

from __future__ import annotations

from pathlib import Path

from support import run_cli

from servelab.check.instructions import RESULTS_SUBDIR, write_record
from servelab.config.load import RequestSpec
from servelab.history.series import COUNT_NOISE_FLOOR, METRICS, build_series, read_points

MACHINE = {"hostname": "ci-1", "cpu_model": "x", "cpu_count": 4, "kernel": "6.1"}
COMMITS = [f"{i:02d}" * 20 for i in range(16)]
STEPS = {5: 1.05, 11: 1.10}  # from commit 5 on 5 % more instructions, from 11 on 10 % more
BASE = 23_357_314.0


def level(commit: int) -> float:
    factor = 1.0
    for at, step in STEPS.items():
        factor *= step if commit >= at else 1.0
    return round(BASE * factor)


def keep_check(root: Path, candidate: int, baseline: int, *, reused: bool = False,
               dirty: bool = False, python: str | None = None) -> None:
    directory = root / RESULTS_SUBDIR / f"check-{candidate:02d}-{baseline:02d}-{reused}"
    directory.mkdir(parents=True)
    versions = {
        role: {"commit": COMMITS[i], "time": f"2026-11-{1 + i:02d}T00:00:00+00:00",
               "dirty": dirty and role == "candidate", "dir": "/w"}
        for role, i in (("candidate", candidate), ("baseline", baseline))
    }
    if python:
        for i, version in enumerate(versions.values()):
            version["python"] = f"{python}-{i}"
    counts = {"baseline": [float(level(baseline))] * 2,
              "candidate": [float(level(candidate))] * 2}
    write_record(directory, RequestSpec(), {**MACHINE, "app_versions": versions},
                 ["baseline"] if reused else [], counts)


def test_each_step_of_the_code_comes_out_at_its_commit_and_nowhere_else(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for i in range(1, len(COMMITS)):  # CI: each commit checked against its parent
        keep_check(root, i, i - 1)
    points = read_points(root, METRICS["instructions"])
    [(key, mine)] = points.items()
    assert key == ("ci-1, x, 4, 6.1", "app")
    series = build_series(key[0], key[1], METRICS["instructions"], mine, 0.2)
    assert [c.commit for c in series.commits] == COMMITS
    assert all(len(c.values) == 4 for c in series.commits[1:-1])  # two counts, two checks
    assert series.noise_sd == COUNT_NOISE_FLOOR  # counts alike to the instruction
    assert [c.index for c in series.changes] == sorted(STEPS)
    for change, step in zip(series.changes, STEPS.values(), strict=True):
        assert abs(change.change_pct - 100 * (step - 1)) < 0.01


def test_reused_dirty_two_environment_and_damaged_counts_are_left_out(tmp_path: Path) -> None:
    root = tmp_path / "results"
    keep_check(root, 3, 0, reused=True)  # a bisect step: the good commit counted before
    keep_check(root, 4, 0, dirty=True)  # uncommitted candidate: only the baseline counts
    keep_check(root, 6, 2, python="/tmp/lock/state")  # one code, two environments
    damaged = root / RESULTS_SUBDIR / "damaged"
    damaged.mkdir()
    (damaged / "counts.json").write_text('{"environment": {}, "instructions_per')
    [mine] = read_points(root, METRICS["instructions"]).values()
    assert sorted((p.commit, p.role) for p in mine) == [
        (COMMITS[0], "baseline"), (COMMITS[0], "baseline"),
        (COMMITS[3], "candidate"), (COMMITS[3], "candidate"),
    ]
    assert read_points(root, METRICS["rps"]) == {}  # no load checks: no database


def test_the_history_page_of_counts_alone(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for i in range(1, len(COMMITS)):
        keep_check(root, i, i - 1)
    done = run_cli("history", "--results", str(root), "--out", str(tmp_path / "h"))
    assert done.returncode == 0, done.stderr
    markdown = (tmp_path / "h" / "history.md").read_text()
    assert "## Instructions per request, app, on ci-1" in markdown
    assert f"| `{COMMITS[5][:10]}` |" in markdown and f"| `{COMMITS[11][:10]}` |" in markdown
    assert "Requests per second" not in markdown
