"""The analysis built as runs arrive is the analysis of those runs from scratch, block after
block (nothing kept across runs goes stale when another comes), and so is every report
written from it."""

from __future__ import annotations

import math
import random

import pytest
from support import FakeExecutor

from servelab.analysis import so_far as so_far_module
from servelab.analysis.analyze import analyze, analyze_workload
from servelab.analysis.profile import run_profiles
from servelab.analysis.so_far import AnalysisSoFar
from servelab.measuring import Runner
from servelab.measuring.executor import Window
from servelab.observe.profile import WindowProfile
from servelab.prepare.building import experiment_from_dict
from servelab.report.base import ReportInput
from servelab.report.formats import EXPORT_FORMATS, output_format
from servelab.report.markdown import render_markdown
from servelab.report.sections import report_sections
from servelab.results.profiles import folded_text
from servelab.results.records import ProcessUsage, RunRecord

EXPERIMENT = experiment_from_dict(
    {
        "name": "so-far",
        "repetitions": 2,
        "slices": 2,
        "baseline": {"name": "base"},
        "variants": [{"name": "unix", "proxy": {"transport": "unix"}}],
        "workloads": [
            {"name": f"w{i}", "request": {"path": "/"}, "load": {"duration_s": 2.0}}
            for i in range(2)
        ],
        "warmup": {"max_rounds": 1, "duration_s": 0.5},
        # Never clear: a round after another, up to 5 starts per variant.
        "stopping": {"precision_pct": 0.01, "budget_s": 1e6, "max_repetitions": 5},
    },
    source="test",
)
FUNCTIONS = ("handle (app.py:10)", "dump (json.py:3)", "parse (req.py:7)", "spin (app.py:44)")


class ProfilingExecutor(FakeExecutor):
    """Two app processes (a master and a worker) and a profile in every window."""

    def __init__(self, rng: random.Random) -> None:
        def level(variant: str, start: int, tick: int, workload: str) -> float:
            return 1000 * math.exp((0.1 if variant == "unix" else 0.0) + rng.gauss(0, 0.05))

        super().__init__(level)
        self.rng = rng

    def _window(self, stack, workload, load) -> Window:
        window = super()._window(stack, workload, load)
        cpu = window.usage[0].cpu_s
        usage = tuple(
            ProcessUsage(role="app", pid=10 * stack.start + n, name="app", cpu_s=cpu * share,
                         peak_rss_bytes=1, system_s=cpu * share / 5)
            for n, share in enumerate((0.1, 0.9))
        )
        stacks = {
            f"app workers;main (w.py:1);{leaf}": self.rng.randrange(1, 50) for leaf in FUNCTIONS
        }
        profile = WindowProfile(stacks, (10 * stack.start,))
        return Window(window.started, window.load, usage, window.observed,
                      window.neighbour_share, profile=profile)


class Sink:
    """A store that keeps runs and their profiles' text in memory."""

    def __init__(self) -> None:
        self.runs: list[RunRecord] = []
        self.folded: dict[str, str] = {}

    def add(self, run: RunRecord) -> None:
        self.runs.append(run)

    def write_profile(self, relative: str, stacks: dict[str, int]) -> None:
        self.folded[relative] = folded_text(stacks)


def measured() -> tuple[list[RunRecord], dict[tuple[str, str, int], str]]:
    sink = Sink()
    runs = Runner(EXPERIMENT, sink, ProfilingExecutor(random.Random(3))).run()
    folded = {
        (r.variant, r.workload, r.repetition): sink.folded[r.profile.file]
        for r in runs if r.profile is not None
    }
    return runs, folded


def blocks(runs: list[RunRecord]) -> list[int]:
    """How many runs there were each time a session writes its report: a workload's runs
    of a block finish together, then the next workload's (or the next block's) come."""
    ends = [n for n in range(1, len(runs)) if runs[n].workload != runs[n - 1].workload]
    return [*ends, len(runs)]


def test_every_block_analysed_as_it_comes_is_the_analysis_from_scratch() -> None:
    runs, folded = measured()
    assert max(r.repetition for r in runs) == 5 and len(folded) == len(runs)
    ends = blocks(runs)
    assert len(ends) >= 6  # the first block's two workloads, then a round at a time
    so_far = AnalysisSoFar(EXPERIMENT)
    added = 0
    verdicts = set()
    for end in ends:
        for run in runs[added:end]:
            key = (run.variant, run.workload, run.repetition)
            so_far.add(run, folded[key])
        added = end
        scratch = analyze(EXPERIMENT, runs[:end])
        assert so_far.analysis() == scratch
        assert so_far.analysis() is so_far.analysis()  # asked twice, worked out once
        assert so_far.runs == tuple(runs[:end])
        assert so_far.profiles == tuple(run_profiles(runs[:end], folded))
        verdicts |= {
            (v.workload, c.verdict, c.p_value) for v in scratch.variants
            for c in v.comparisons.values()
        }
    assert len(verdicts) > len(ends)  # the answers changed from block to block


def test_every_report_written_as_runs_come_is_the_report_from_scratch() -> None:
    runs, folded = measured()
    so_far = AnalysisSoFar(EXPERIMENT)
    added = 0
    for end in blocks(runs):
        for run in runs[added:end]:
            so_far.add(run, folded[(run.variant, run.workload, run.repetition)])
        added = end
        mine = ReportInput.so_far(so_far, {})
        scratch = ReportInput.build(
            EXPERIMENT, {}, runs[:end], profiles={
                key: text for key, text in folded.items()
                if any((r.variant, r.workload, r.repetition) == key for r in runs[:end])
            },
        )
        text = render_markdown(report_sections(mine, with_files=False))
        assert text == render_markdown(report_sections(scratch, with_files=False))
        assert "## Why" in text or end < len(runs)
        for fmt in EXPORT_FORMATS:
            render = output_format(fmt).export_renderer()
            assert render(mine) == render(scratch), fmt


def test_a_run_added_after_an_answer_is_in_the_next_answer() -> None:
    runs, _ = measured()
    so_far = AnalysisSoFar(EXPERIMENT)
    for run in runs[:-1]:
        so_far.add(run)
    before = so_far.analysis()
    so_far.add(runs[-1])
    after = so_far.analysis()
    assert after == analyze(EXPERIMENT, runs) and after != before
    assert sum(len(v.runs) for v in after.variants) == len(runs)


def test_only_the_workload_whose_runs_came_is_analysed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs, _ = measured()
    asked: list[str] = []

    def counted(experiment, workload, workload_runs, **settings):
        asked.append(workload.name)
        return analyze_workload(experiment, workload, workload_runs, **settings)

    monkeypatch.setattr(so_far_module, "analyze_workload", counted)
    so_far = AnalysisSoFar(EXPERIMENT)
    added = 0
    for end in blocks(runs):
        for run in runs[added:end]:
            so_far.add(run)
        asked.clear()
        assert so_far.analysis() == analyze(EXPERIMENT, runs[:end])
        came = {r.workload for r in runs[added:end]}
        # The first time every workload; then only the one whose runs came.
        assert asked == ([w.name for w in EXPERIMENT.workloads] if added == 0 else list(came))
        added = end
    so_far.analysis(min_effect_pct=1.0)  # other settings: parts of their own
    assert len(asked) == len(EXPERIMENT.workloads) + 1
