"""Slices stored with their runs, analysed by design, answered first."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import FakeExecutor, ListSink

from servelab.analysis.analyze import analyze, comparisons_document
from servelab.analysis.warnings import WarningKind
from servelab.cli import cli
from servelab.config.run import parse_duration
from servelab.errors import SpecError
from servelab.measuring import Runner
from servelab.prepare.building import experiment_from_dict
from servelab.report.answer import build_answer
from servelab.report.base import ReportInput
from servelab.report.data import runs_csv
from servelab.results.store import ResultStore


def experiment(**extra):
    data = {
        "name": "sliced",
        "repetitions": 3,
        "baseline": {"name": "base"},
        "variants": [{"name": "fast", "proxy": {"transport": "unix"}}],
        "workloads": [{"name": "w", "request": {"path": "/"}, "load": {"duration_s": 4.0}}],
        "warmup": {"max_rounds": 1},
        **extra,
    }
    return experiment_from_dict(data, source="test")


def measured(effect: float, *, seed: int = 0, side_by_side: bool = False, repetitions: int = 3):
    """Runs of a fake machine whose speed drifts by pass and whose starts differ a little."""
    rng = random.Random(seed)
    starts: dict[int, float] = {}
    drift: dict[int, float] = {}

    def level(variant, start, tick, workload):
        starts.setdefault(start, rng.gauss(0, 0.01))
        drift.setdefault(tick, rng.gauss(0, 0.1))
        shift = effect if variant == "fast" else 0.0
        return 1000 * math.exp(shift + starts[start] + drift[tick] + rng.gauss(0, 0.01))

    exp = experiment(repetitions=repetitions, **({"side_by_side": True} if side_by_side else {}))
    return exp, Runner(exp, ListSink(), FakeExecutor(level)).run()


def test_side_by_side_cancels_a_drift_that_turns_cannot():
    exp, runs = measured(0.10, side_by_side=True, repetitions=5)  # 4 df: a steady width
    comparisons = analyze(exp, runs).for_workload("w")[1].comparisons
    per_cpu = comparisons["rps_per_cpu"]  # the fake stacks keep their CPU busy
    assert per_cpu.test == "nested t-test over stack starts"
    low, high = per_cpu.interval_pct
    assert low < 100 * math.expm1(0.10) < high
    # A 10 % drift per moment is gone: narrower than half the same starts in turns give.
    _, turns = measured(0.10, repetitions=5)
    apart = analyze(experiment(repetitions=5), turns).for_workload("w")[1].comparisons["rps"]
    assert (high - low) / 2 < 5
    assert (high - low) < (apart.interval_pct[1] - apart.interval_pct[0]) / 2
    assert per_cpu.verdict == "better"
    # Requests/s side by side is a share of shared CPUs: shown, never judged.
    share = comparisons["rps"]
    assert share.verdict == "not judged" and share.p_value is None
    assert share.interval_pct is not None and "share" in share.reason
    assert comparisons["latency_p99_ms"].verdict == "not judged"


def test_slices_are_stored_and_exported(tmp_path: Path):
    exp, runs = measured(0.0)
    store = ResultStore.create(tmp_path, exp, {"hostname": "test"})
    for run in runs:
        store.add(run)
    again = store.runs()
    assert [r.slice_figures for r in again] == [r.slice_figures for r in runs]
    assert all(len(r.slice_figures) == 4 for r in again)
    assert ResultStore.open(store.path).runs() == again  # runs.jsonl holds them too
    report = ReportInput.from_store(store)
    document = json.loads(__import__("servelab.report.data", fromlist=["x"]).runs_json(report))
    assert len(document["runs"][0]["slice_figures"]) == 4
    rows = runs_csv(report).splitlines()
    header = rows[0].split(",")
    assert "slice_pass" in header
    slice_rows = [r for r in rows[1:] if r.split(",")[header.index("slice_pass")]]
    assert len(slice_rows) == len(runs) * 4


def test_answer_names_the_winner_and_every_comparison():
    exp, runs = measured(0.2, side_by_side=True, repetitions=7)
    answer = build_answer(analyze(exp, runs))
    (workload,) = answer.workloads
    assert workload.winner == "fast"
    (line,) = workload.lines
    assert line.verdict == "better" and line.clear
    assert "fast: +" in line.text() and "95 % CI" in line.text()


def test_json_comparisons(tmp_path: Path):
    exp, runs = measured(0.2, side_by_side=True, repetitions=7)
    document = comparisons_document(analyze(exp, runs))
    rps = next(c for c in document["comparisons"] if c["metric"] == "rps_per_cpu")
    assert rps["variant"] == "fast" and rps["verdict"] == "better" and rps["clear"]
    assert rps["ratio"] == pytest.approx(1 + rps["change_pct"] / 100)
    assert rps["restarts"] == [7, 7] and rps["passes"] == 7 * 2 and rps["df"] == 6
    store = ResultStore.create(tmp_path, exp, {"hostname": "test"})
    for run in runs:
        store.add(run)
    result = CliRunner().invoke(cli, ["results", "show", "1", "--json", "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["comparisons"] == json.loads(json.dumps(document["comparisons"]))


def test_old_results_without_slices_keep_the_rounds_tests():
    exp, runs = measured(0.0)
    plain = [r.model_copy(update={"slice_figures": ()}) for r in runs]
    rps = analyze(exp, plain).for_workload("w")[1].comparisons["rps"]
    assert rps.test == "paired t-test"


def test_defaults_slice_where_it_applies():
    assert experiment().slices == 4  # 4 s: about a second a slice
    assert experiment(driver="ab").slices == 1
    assert experiment(side_by_side=True).slices == 2  # about 3 s a slice, at least two
    with pytest.raises(SpecError, match="side_by_side"):
        experiment(side_by_side=True, slices=1)
    with pytest.raises(SpecError, match="stopping"):
        experiment(slices=1, stopping={"budget_s": 60})


@pytest.mark.parametrize(
    ("text", "seconds"), [("3m", 180), ("90s", 90), ("1h", 3600), ("1m30s", 90), ("200", 200)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "x", "3 minutes", "-1m", "0s"])
def test_bad_durations(text):
    with pytest.raises(SpecError):
        parse_duration(text)


def test_uneven_workers_are_shown():
    from servelab.analysis.checks import worker_split
    from servelab.results.records import ProcessUsage

    exp, runs = measured(0.0)
    run = runs[0]

    def usage(*cpu):
        return tuple(
            ProcessUsage(role="app", pid=i + 1, name="python", cpu_s=c, peak_rss_bytes=1)
            for i, c in enumerate(cpu)
        )

    assert worker_split(run.model_copy(update={"processes": usage(0.001, 1.0, 1.1)})) == (1.1, 1.0)
    assert worker_split(run.model_copy(update={"processes": usage(0.001, 1.0)})) is None
    lopsided = [
        r.model_copy(update={"processes": usage(0.0, 2.0, 0.5)}) if r.variant == "fast" else r
        for r in runs
    ]
    warnings = analyze(exp, lopsided).all_warnings
    (uneven,) = [w for w in warnings if w.kind is WarningKind.UNEVEN_WORKERS]
    assert uneven.variant == "fast" and "2.00 CPU s" in uneven.message
