"""The answer first: per workload, each variant's change against the baseline with its
interval and verdict, the winner, and the warnings grouped by kind.

Built once from the analysis (pure), rendered by the terminal and the reports
alike, so that every place says the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.analysis.analyze import METRIC_BY_KEY, ExperimentAnalysis, answer_metric, clarity
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
        return f"{self.variant}: {change}, {self.verdict}; {state}"


@dataclass(frozen=True)
class WorkloadAnswer:
    workload: str
    lines: tuple[AnswerLine, ...]
    winner: str  # a variant, or the baseline when none beat it
    winner_note: str


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

    @property
    def unclear(self) -> int:
        return sum(not line.clear for w in self.workloads for line in w.lines)

    @property
    def tests(self) -> tuple[str, ...]:
        """The tests the comparisons actually used (analysis.analyze.compare_variants)."""
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
                )
            )
        if not lines:
            continue
        winners = [
            line
            for line in lines
            if line.verdict == ("better" if metric.higher_is_better else "worse")
        ]
        if winners:
            best = max(winners, key=lambda line: line.change_pct or 0.0)
            winner, note = best.variant, f"{best.change_pct:+.1f} % {metric.unit} vs baseline"
        else:
            winner = experiment.baseline.name
            note = "no variant is significantly better than the baseline"
        answers.append(WorkloadAnswer(workload.name, tuple(lines), winner, note))
    return Answer(metric.key, tuple(answers), group_warnings(analysis), precision)


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
        f"{metric.label} of each variant against the baseline, 95 % intervals; clear means "
        f"the interval is within ±{answer.precision_pct:g} % or entirely on one side of zero."
    )
    if answer.metric == "rps_per_cpu":
        text += (
            " The stacks were measured side by side, sharing the CPU: requests per CPU "
            "second of each stack is what it serves with a CPU to itself (CPU-bound), "
            "its requests/s only its share."
        )
    return text
