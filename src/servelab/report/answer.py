"""The answer first: per workload, each variant's change against the baseline with its
interval and verdict, the winner, and the warnings grouped by kind.

Built once from the analysis (pure), rendered by the terminal and the reports
alike, so that every place says the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.analysis.analyze import ExperimentAnalysis, clarity
from servelab.analysis.comparisons import compare_variants
from servelab.analysis.metrics import METRIC_BY_KEY, Metric, answer_metric
from servelab.analysis.stats import MIN_CLEAR_DF, Comparison, p_text
from servelab.analysis.validity import latency_judged, not_judged_because
from servelab.analysis.warnings import ResultWarning, WarningKind


@dataclass(frozen=True)
class AnswerLine:
    variant: str
    change_pct: float | None
    low_pct: float | None
    high_pct: float | None
    verdict: str
    clear: bool
    test: str
    starts_needed: int | None  # per variant, when not clear
    # The family size when the interval (95 %, this comparison alone) clears zero but the
    # verdict, judged over the whole study (Holm), does not: said so, not left to look
    # like a contradiction.
    judged_over: int | None = None
    p_alone: float | None = None

    @property
    def verdict_text(self) -> str:
        if self.judged_over is None:
            return self.verdict
        alone = f" (p {p_text(self.p_alone)} alone)" if self.p_alone is not None else ""
        return f"{self.verdict} over the study's {self.judged_over} comparisons{alone}"

    def text(self) -> str:
        if self.change_pct is None:
            change = "no comparison"
        else:
            change = f"{self.change_pct:+.1f} %"
            if self.low_pct is not None and self.high_pct is not None:
                change += f" (95 % CI {self.low_pct:+.1f} … {self.high_pct:+.1f} %)"
        state = "clear" if self.clear else "not clear yet"
        if not self.clear and self.starts_needed:
            state += f": about {self.starts_needed} starts per variant would make it clear"
        return f"{self.variant}: {change}, {self.verdict_text}; {state}"


@dataclass(frozen=True)
class WorkloadAnswer:
    workload: str
    lines: tuple[AnswerLine, ...]
    # A variant that beat the baseline and the runner-up, the baseline when none beat it,
    # or None when the leaders cannot be told apart (winner_note names them).
    winner: str | None
    winner_note: str

    @property
    def headline(self) -> str:
        return f"winner {self.winner}" if self.winner else "no single winner"


@dataclass(frozen=True)
class GroupedWarning:
    kind: WarningKind
    message: str  # the first one's message
    hint: str
    where: tuple[str, ...]  # "variant/workload" of every warning of this kind

    def text(self) -> str:
        if len(self.where) > 1:
            return (
                f"{self.kind} in {len(self.where)} places ({', '.join(self.where)}); e.g. "
                f"{self.where[0]}: {self.message} (hint: {self.hint})"
            )
        place = f" ({self.where[0]})" if self.where else ""
        return f"{self.kind}{place}: {self.message} (hint: {self.hint})"


@dataclass(frozen=True)
class Answer:
    metric: str
    workloads: tuple[WorkloadAnswer, ...]
    warnings: tuple[GroupedWarning, ...]
    precision_pct: float
    latency_note: str | None = None  # why this design judges no latency, if it does not

    @property
    def unclear(self) -> int:
        return sum(not line.clear for w in self.workloads for line in w.lines)

    @property
    def tests(self) -> tuple[str, ...]:
        """The tests the comparisons actually used (analysis.comparisons.compare_variants)."""
        return tuple(sorted({line.test for w in self.workloads for line in w.lines}))


def build_answer(analysis: ExperimentAnalysis, *, precision_pct: float | None = None) -> Answer:
    experiment = analysis.experiment
    stopping = experiment.stopping
    precision = precision_pct or (stopping.precision_pct if stopping else 5.0)
    min_effect = stopping.min_effect_pct if stopping else 0.0
    metric = answer_metric(experiment)
    needed = {
        (c.workload, c.variant): c.starts_needed
        for c in clarity(analysis, precision, min_effect, (metric.key,))
    }
    answers = []
    for workload in experiment.workloads:
        variants = analysis.for_workload(workload.name)
        lines = []
        for v in variants:
            comparison = v.comparisons.get(metric.key)
            if v.is_baseline or comparison is None:
                continue
            bounds = comparison.interval_pct
            clear = comparison.is_clear(precision, min_effect)
            lines.append(
                AnswerLine(
                    v.variant,
                    comparison.difference_pct,
                    bounds[0] if bounds else None,
                    bounds[1] if bounds else None,
                    comparison.verdict,
                    clear,
                    comparison.test,
                    None if clear else needed.get((workload.name, v.variant)),
                    *_held_back(comparison),
                )
            )
        if not lines:
            continue
        winner, note = _winner(analysis, workload.name, lines, metric)
        answers.append(WorkloadAnswer(workload.name, tuple(lines), winner, note))
    latency_note = None
    if experiment.workloads and not latency_judged(experiment):
        why = not_judged_because(experiment, experiment.workloads[0], "latency_p99_ms")
        latency_note = f"No latency verdict: {why}."
    return Answer(
        metric.key, tuple(answers), group_warnings(analysis), precision, latency_note
    )


def _held_back(comparison: Comparison) -> tuple[int | None, float | None]:
    """(family size, p alone) when the comparison alone would be significant (its 95 %
    interval clears zero) but the study's family-wise verdict is not; else (None, None)."""
    bounds = comparison.interval_pct
    if (
        comparison.verdict == "no significant difference"
        and (comparison.family or 0) > 1
        and bounds is not None
        and (bounds[0] > 0 or bounds[1] < 0)
    ):
        return comparison.family, comparison.p_value
    return None, None


def _winner(
    analysis: ExperimentAnalysis, workload: str, lines: list[AnswerLine], metric: Metric
) -> tuple[str | None, str]:
    """Multiple comparisons with the best: the variant with the best estimate among those
    significantly better than the baseline (family-adjusted) wins only when it is also
    significantly better than the runner-up, measured against it directly."""
    better = "better"  # a verdict's word is the change's worth, whichever way is up
    winners = [line for line in lines if line.verdict == better]
    baseline = analysis.experiment.baseline.name
    if not winners:
        return baseline, "no variant is significantly better than the baseline"
    sign = 1 if metric.higher_is_better else -1
    ranked = sorted(lines, key=lambda line: sign * (line.change_pct or 0.0), reverse=True)
    best = ranked[0] if ranked[0].verdict == better else max(
        winners, key=lambda line: sign * (line.change_pct or 0.0)
    )
    note = f"{best.change_pct:+.1f} % vs baseline"
    runner_up = next((line for line in ranked if line is not best), None)
    if runner_up is None or sign * (runner_up.change_pct or 0.0) <= 0:
        return best.variant, note  # the runner-up is no better than the baseline it beat
    runs = [r for v in analysis.for_workload(workload) for r in v.runs]
    versus = compare_variants(runs, runner_up.variant, best.variant, metric)
    bounds = versus.interval_pct
    against = (
        f"{versus.difference_pct:+.1f} %" if versus.difference_pct is not None else ""
    )
    if bounds is not None:
        against += f" [{bounds[0]:+.1f}, {bounds[1]:+.1f}]"
    against += f" vs {runner_up.variant}"
    if versus.verdict == better:
        return best.variant, f"{note}, {against}"
    if runner_up.verdict == better:
        return None, (
            f"{best.variant} and {runner_up.variant} are not significantly different "
            f"({best.variant} {against}); both beat the baseline"
        )
    return None, (
        f"{best.variant} beats the baseline but not significantly {runner_up.variant} "
        f"({best.variant} {against}), which does not significantly beat the baseline"
    )


def group_warnings(analysis: ExperimentAnalysis) -> tuple[GroupedWarning, ...]:
    """One entry per kind of warning, naming every variant/workload it concerns."""
    groups: dict[WarningKind, list[ResultWarning]] = {}
    for warning in analysis.all_warnings:
        groups.setdefault(warning.kind, []).append(warning)
    grouped = []
    for kind, found in groups.items():
        where = tuple(
            "/".join(x for x in (w.variant, w.workload) if x)
            for w in found
            if w.variant or w.workload
        )
        grouped.append(GroupedWarning(kind, found[0].message, found[0].hint, where))
    return tuple(grouped)


def answer_intro(answer: Answer) -> str:
    metric = METRIC_BY_KEY[answer.metric]
    text = (
        f"{metric.label} against the baseline, 95 % intervals; verdicts Holm-adjusted over "
        f"the study; clear: within ±{answer.precision_pct:g} % on at least {MIN_CLEAR_DF} "
        "degrees of freedom, or the 99.9 % interval clear of zero."
    )
    if answer.metric == "rps_per_cpu":
        text += (
            " Side by side on shared CPUs: requests per CPU second is what a stack serves "
            "with a CPU to itself (CPU-bound, checked), its requests/s only its share."
        )
    if answer.latency_note:
        text += f" {answer.latency_note}"
    return text
