"""Stop rules the runner consults: a ramp's SLO, and "measure until the answer is clear".

Both are policies handed to the runner, decided from the runs so far; they do
not measure anything themselves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from servelab.analysis.analyze import (
    Clarity,
    ExperimentAnalysis,
    analyze,
    clarity,
    threshold_comparison,
)
from servelab.analysis.comparisons import slice_design
from servelab.analysis.metrics import answer_metric
from servelab.analysis.nested import starts_needed, variance_components
from servelab.analysis.so_far import AnalysisSoFar
from servelab.analysis.stats import EARLY_LEVEL
from servelab.analysis.thresholds import distance_to_decide, judge, parse_threshold
from servelab.analysis.validity import as_measured
from servelab.config.experiment import Experiment
from servelab.config.load import SloSpec
from servelab.measuring.plan import Launch
from servelab.measuring.ramp import ramp_should_stop
from servelab.results.records import RunRecord

# A later round measures each start for at most this many times the spec's slices.
MAX_PASS_FACTOR = 4


@dataclass(frozen=True)
class SloStop:
    """A ramp stops a launch's rising rates once they broke its SLO (servelab.measuring.ramp)."""

    slo: SloSpec | None

    def stops(self, runs: Sequence[RunRecord], launch: Launch) -> bool:
        return ramp_should_stop(runs, launch.stack.name, launch.repetition, self.slo)


@dataclass
class RoundsSoFar:
    """Rounds measured and where their time went (starting stacks; each workload's
    warm-ups and passes), to foresee the next round's."""

    rounds: int = 0
    launch_s: float = 0.0
    workload_s: dict[str, float] = field(default_factory=dict)
    # Passes measured per workload, summed over rounds (a block of 3 rounds x 2 passes: 6).
    passes: dict[str, int] = field(default_factory=dict)

    def add_launch(self, rounds: int, seconds: float) -> None:
        self.rounds += rounds
        self.launch_s += seconds

    def add_workload(self, workload: str, passes: int, seconds: float) -> None:
        self.workload_s[workload] = self.workload_s.get(workload, 0.0) + seconds
        self.passes[workload] = self.passes.get(workload, 0) + passes

    def expected_s(self, workloads: Sequence[str], passes: int) -> float:
        """A round of fresh starts measuring ``workloads`` with ``passes`` passes each."""
        if not self.rounds:
            return 0.0
        total = self.launch_s / self.rounds
        for workload in workloads:
            done = self.passes.get(workload, 0)
            if done:  # time per pass, warm-ups included (they come once per round)
                total += self.workload_s[workload] / done * passes
        return total


@dataclass(frozen=True)
class NextRound:
    """One more round of fresh starts: for these workloads, this many passes each."""

    workloads: tuple[str, ...]
    passes: int
    expected_s: float
    stacks: int | None = None  # stacks started in it (None: every variant)
    note: str | None = None  # what the progress line says instead of "not clear yet"


@dataclass(frozen=True)
class Outlook:
    """Where the stopping rule stands: what is clear, and what the rest would take."""

    unclear: tuple[tuple[str, str], ...]  # (workload, variant) of the answer's comparisons
    more_starts: int  # starts per variant the unclear ones need beyond those measured
    more_seconds: float  # the measuring time that would take, at this experiment's pace
    reason: str  # why measuring stopped ("" while it goes on)
    clear: int = 0  # comparisons (or thresholds) clear so far
    total: int = 0  # of these
    left_s: float = 0.0  # the measuring time the budget still holds

    @property
    def beyond_budget(self) -> bool:
        """True when what the unclear comparisons need is more than the budget holds."""
        return bool(self.unclear) and self.more_seconds > self.left_s

    @property
    def expected_s(self) -> float:
        """Measuring time still expected: what the unclear ones need, within the budget."""
        return min(self.more_seconds, self.left_s)


def threshold_clarity(analysis: ExperimentAnalysis, thresholds: Sequence[str]) -> list[Clarity]:
    """Each relative threshold of each comparison: clear once decided (crossed or held),
    with the starts its interval would need to reach the limit (``servelab check``)."""
    found = []
    for v in analysis.variants:
        if v.variant == analysis.experiment.baseline.name:
            continue
        for threshold in map(parse_threshold, thresholds):
            if not threshold.relative:
                continue  # a count is decided by what was measured
            comparison = threshold_comparison(analysis.experiment, v, threshold.metric)
            # Decided before the budget ends only on the 99.9 % interval (Haybittle-Peto),
            # so that looking after every round keeps the final 95 % judgement's error
            # rates (its t quantile pays for few df: stats.EARLY_LEVEL).
            early = (
                judge(threshold, comparison.widened(EARLY_LEVEL), 0.0).state
                if comparison is not None and comparison.df
                else "inconclusive"
            )
            bounds = None if comparison is None else comparison.interval_pct
            half = None if bounds is None else (bounds[1] - bounds[0]) / 2
            starts = max((comparison.starts if comparison else None) or (len(v.runs),) * 2)
            target = distance_to_decide(threshold, comparison)
            needed = None if half is None or target is None else starts_needed(
                half, starts, target
            )
            found.append(
                Clarity(v.workload, v.variant, threshold.metric, early != "inconclusive", half,
                        starts, needed, crossed=early == "crossed")
            )
    return found


class PrecisionRule:
    """Adds rounds of starts until every comparison of the answer's metric (requests/s; per
    CPU second side by side) is clear (its 95 % interval
    within ±precision, or entirely beyond ±min-effect), the next round would overrun
    the budget, or the starts reach their maximum. Passes per start double (up to
    4x) while a start's slices are noisier than the starts are different."""

    def __init__(self, experiment: Experiment, so_far: AnalysisSoFar | None = None) -> None:
        assert experiment.stopping is not None
        self.experiment = experiment
        # The session's analysis as runs arrive: asked instead of analysing again when it
        # holds the very runs the rule is deciding on (the report then asks it too).
        self.so_far = so_far
        self.stopping = experiment.stopping
        self.passes = experiment.slices
        self.outlook: Outlook | None = None

    def _assess(self, runs: Sequence[RunRecord]) -> list[Clarity]:
        min_effect = self.stopping.min_effect_pct
        if self.so_far is not None and self.so_far.holds(runs):
            analysis = self.so_far.analysis(min_effect_pct=min_effect)
        else:
            analysis = analyze(self.experiment, runs, min_effect_pct=min_effect)
        if self.stopping.thresholds:
            return threshold_clarity(analysis, self.stopping.thresholds)
        return clarity(analysis, self.stopping.precision_pct, self.stopping.min_effect_pct)

    def _passes_for(self, runs: Sequence[RunRecord], workloads: Sequence[str]) -> int:
        """Double the passes when, in the unclear workloads, the slices are the noisier part."""
        experiment, runs = as_measured(self.experiment, runs)
        metric = answer_metric(experiment)
        slices_dominate = False
        for workload in workloads:
            own = [r for r in runs if r.workload == workload]
            parts = variance_components(slice_design(own, metric, log_scale=True))
            if parts is not None and not parts.starts_dominate:
                slices_dominate = True
        if slices_dominate:
            return min(self.passes * 2, self.experiment.slices * MAX_PASS_FACTOR)
        return self.passes

    def next_round(
        self, runs: Sequence[RunRecord], elapsed_s: float, rounds: RoundsSoFar
    ) -> NextRound | None:
        found = self._assess(runs)
        unclear = [c for c in found if not c.clear]
        starts = max((r.repetition for r in runs), default=0)
        needed = max((c.starts_needed or starts for c in unclear), default=starts)
        more = max(0, needed - starts) if unclear else 0
        unclear_workloads = tuple(dict.fromkeys(c.workload for c in unclear))

        def look(reason: str) -> None:
            """Where the rule stands (``reason``: why it stops; "" when it goes on)."""
            per_round = rounds.expected_s(unclear_workloads, self.passes)
            self.outlook = Outlook(
                tuple((c.workload, c.variant) for c in unclear), more, more * per_round, reason,
                clear=len(found) - len(unclear), total=len(found),
                left_s=max(0.0, self.stopping.budget_s - elapsed_s),
            )

        crossed = [c for c in found if c.crossed]
        if crossed:  # the check has failed: more rounds would only refine the others
            look(f"a threshold is crossed ({crossed[0].metric}, {crossed[0].variant}); "
                 "the rest would not change the verdict")
            return None
        if not unclear:
            look(
                "every threshold is decided" if self.stopping.thresholds
                else f"every {answer_metric(as_measured(self.experiment, runs)[0]).label.lower()}"
                " comparison is clear"
            )
            return None
        if starts >= self.stopping.max_repetitions:
            look(f"{starts} starts per variant, the most allowed")
            return None
        workloads = unclear_workloads
        passes = self._passes_for(runs, workloads)
        expected = rounds.expected_s(workloads, passes)
        remaining = self.stopping.budget_s - elapsed_s
        while expected > remaining and passes > 1:  # a shorter round may still fit
            passes -= 1
            expected = rounds.expected_s(workloads, passes)
        if expected > remaining:
            look(
                f"the budget of {self.stopping.budget_s:g} s would be overrun by another "
                f"round (about {math.ceil(expected)} s)"
            )
            return None
        self.passes = max(self.passes, passes)
        look("")  # not stopping: the outlook at this look, for the console
        return NextRound(workloads, passes, expected)
