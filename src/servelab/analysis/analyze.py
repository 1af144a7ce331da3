"""From raw runs to conclusions: per-variant summaries, comparisons with the
baseline, and warnings — all as frozen data that every report renders alike.

The parts live beside it, one concern each: ``metrics`` (the figures and their
summaries), ``comparisons`` (the test each design allows), ``checks`` (the warnings);
this module puts them together into the result (``analyze``), says which comparisons
are clear (``clarity``) and which one a threshold is judged by (``threshold_comparison``),
and writes them out machine-readable (``comparisons_document``).

Pure: no I/O. Warnings are values with a hint (hyperfine's idea), never prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from servelab.analysis.checks import experiment_warnings, variant_warnings
from servelab.analysis.comparisons import compare_variants
from servelab.analysis.family import judge_family
from servelab.analysis.metrics import (
    DEFAULT_PRECISION_PCT,
    MetricSummary,
    answer_metric,
    compared_metrics,
    summaries,
)
from servelab.analysis.nested import starts_needed
from servelab.analysis.stats import NOT_JUDGED, Comparison
from servelab.analysis.validity import (
    as_measured,
    judged_metric,
    not_judged_because,
    replay_not_kept,
)
from servelab.analysis.warnings import ResultWarning
from servelab.config.experiment import Experiment
from servelab.config.load import Workload
from servelab.prepare.checks import describe_stack
from servelab.results.records import RunRecord


@dataclass(frozen=True)
class VariantAnalysis:
    workload: str
    variant: str
    description: str
    is_baseline: bool
    runs: tuple[RunRecord, ...]
    metrics: dict[str, MetricSummary]
    comparisons: dict[str, Comparison]  # empty for the baseline
    warnings: tuple[ResultWarning, ...]

    @property
    def total_errors(self) -> int:
        return sum(r.load.errors for r in self.runs)


@dataclass(frozen=True)
class ExperimentAnalysis:
    experiment: Experiment
    variants: tuple[VariantAnalysis, ...]
    warnings: tuple[ResultWarning, ...]  # experiment-wide; per-variant ones sit on variants

    def for_workload(self, workload: str) -> tuple[VariantAnalysis, ...]:
        return tuple(v for v in self.variants if v.workload == workload)

    @property
    def all_warnings(self) -> tuple[ResultWarning, ...]:
        return self.warnings + tuple(w for v in self.variants for w in v.warnings)


@dataclass(frozen=True)
class WorkloadAnalysis:
    """One workload's part of an analysis: each variant summarised, with its warnings,
    and compared with the baseline before the verdicts are judged as a family (the
    variants' ``comparisons`` are left empty here; ``analyze`` fills them in)."""

    variants: tuple[VariantAnalysis, ...]
    compared: Mapping[str, Mapping[str, Comparison]]  # variant -> metric -> comparison


def threshold_comparison(
    experiment: Experiment, variant: VariantAnalysis, metric: str
) -> Comparison | None:
    """The comparison a threshold on ``metric`` is judged by (``judged_metric``)."""
    workload = next(w for w in experiment.workloads if w.name == variant.workload)
    key = judged_metric(experiment, workload, metric)
    return None if key is None else variant.comparisons.get(key)


def analyze_workload(
    experiment: Experiment,
    workload: Workload,
    runs: Sequence[RunRecord],
    *,
    alpha: float,
    min_effect_pct: float,
    precision_pct: float,
) -> WorkloadAnalysis:
    """``workload``'s part of ``analyze`` from its runs (``experiment`` as measured)."""
    compared: dict[str, dict[str, Comparison]] = {}
    if any(r.variant == experiment.baseline.name for r in runs):
        for stack in experiment.variants:
            if not any(r.variant == stack.name for r in runs):
                continue
            found = {}
            for metric in compared_metrics(experiment):
                comparison = compare_variants(
                    runs, experiment.baseline.name, stack.name, metric, alpha=alpha,
                    min_effect_pct=min_effect_pct,
                )
                why = not_judged_because(experiment, workload, metric.key) or replay_not_kept(
                    runs, (experiment.baseline.name, stack.name)
                )
                if why is not None:
                    comparison = replace(
                        comparison, verdict=NOT_JUDGED, reason=why, p_value=None
                    )
                found[metric.key] = comparison
            compared[stack.name] = found
    variants = []
    for stack in experiment.stacks:
        own = sorted((r for r in runs if r.variant == stack.name), key=lambda r: r.repetition)
        if not own:
            continue
        metrics = summaries(own)
        variants.append(
            VariantAnalysis(
                workload.name,
                stack.name,
                describe_stack(stack),
                stack.name == experiment.baseline.name,
                tuple(own),
                metrics,
                {},
                tuple(variant_warnings(own, metrics, precision_pct, stack.name, workload.name)),
            )
        )
    return WorkloadAnalysis(tuple(variants), compared)


# How ``analyze`` gets each workload's part: ``analyze_workload``, or (a session's
# analysis as runs arrive, ``so_far``) the part it already has for exactly those runs.
WorkloadAnalyser = Callable[..., WorkloadAnalysis]


def analyze(
    experiment: Experiment,
    runs: Sequence[RunRecord],
    *,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
    precision_pct: float = DEFAULT_PRECISION_PCT,
    by_workload: WorkloadAnalyser = analyze_workload,
) -> ExperimentAnalysis:
    """Every variant of every workload summarised and compared with the baseline.

    Each comparison is made by the test its design allows (``compare_variants``); a
    metric the design cannot vouch for is shown without a verdict (``validity``); the
    verdicts of each metric are judged together over the whole experiment, Holm-adjusted
    (``family``), so that identical stacks are called different in at most ``alpha``
    of experiments, however many questions they ask."""
    probed = list(runs)
    experiment, runs = as_measured(experiment, runs)
    parts = [
        by_workload(
            experiment, workload, [r for r in runs if r.workload == workload.name],
            alpha=alpha, min_effect_pct=min_effect_pct, precision_pct=precision_pct,
        )
        for workload in experiment.workloads
    ]
    compared: dict[tuple[str, str], dict[str, Comparison]] = {
        (workload.name, variant): dict(found)
        for workload, part in zip(experiment.workloads, parts, strict=True)
        for variant, found in part.compared.items()
    }
    for metric in compared_metrics(experiment):
        keys = [key for key, found in compared.items() if metric.key in found]
        judged = judge_family(
            [compared[key][metric.key] for key in keys],
            higher_is_better=metric.higher_is_better, alpha=alpha, min_effect_pct=min_effect_pct,
        )
        for key, comparison in zip(keys, judged, strict=True):
            compared[key][metric.key] = comparison
    variants = [
        replace(v, comparisons=compared.get((v.workload, v.variant), {}))
        for part in parts
        for v in part.variants
    ]
    warnings = experiment_warnings(
        experiment, runs, [w for v in variants for w in v.warnings], probed
    )
    return ExperimentAnalysis(experiment, tuple(variants), tuple(warnings))


@dataclass(frozen=True)
class Clarity:
    """Whether one comparison is clear at the experiment's precision, and what would
    make it so."""

    workload: str
    variant: str
    metric: str
    clear: bool
    half_width_pct: float | None
    starts: int  # starts per variant so far
    starts_needed: int | None  # per variant, for the interval to reach the precision
    crossed: bool = False  # a check's threshold decided as crossed: the check has failed


def clarity(
    analysis: ExperimentAnalysis,
    precision_pct: float,
    min_effect_pct: float = 0.0,
    metrics: Sequence[str] | None = None,
) -> list[Clarity]:
    """Every comparison of ``metrics`` (default: the answer's metric): clear or not, and
    the starts a clear one needs."""
    metrics = metrics or (answer_metric(analysis.experiment).key,)
    found = []
    for v in analysis.variants:
        for key in metrics:
            comparison = v.comparisons.get(key)
            if comparison is None:
                continue
            bounds = comparison.interval_pct
            half = None if bounds is None else (bounds[1] - bounds[0]) / 2
            starts = max(comparison.starts or (len(v.runs), len(v.runs)))
            needed = None if half is None else starts_needed(half, starts, precision_pct)
            found.append(
                Clarity(
                    v.workload,
                    v.variant,
                    key,
                    comparison.is_clear(precision_pct, min_effect_pct),
                    half,
                    starts,
                    needed,
                )
            )
    return found


def comparisons_document(
    analysis: ExperimentAnalysis, precision_pct: float | None = None, min_effect_pct: float = 0.0
) -> dict:
    """Every comparison with the baseline, machine-readable (``results show --json``)."""
    stopping = analysis.experiment.stopping
    precision = precision_pct or (stopping.precision_pct if stopping else DEFAULT_PRECISION_PCT)
    rows = []
    for v in analysis.variants:
        for key, c in v.comparisons.items():
            bounds = c.interval_pct
            pct = c.difference_pct
            rows.append(
                {
                    "workload": v.workload,
                    "variant": v.variant,
                    "metric": key,
                    "baseline_mean": c.baseline_mean,
                    "variant_mean": c.variant_mean,
                    "ratio": None if pct is None else 1 + pct / 100,
                    "change_pct": pct,
                    "interval_pct": list(bounds) if bounds else None,
                    "half_width_pct": None if bounds is None else (bounds[1] - bounds[0]) / 2,
                    "p_value": c.p_value,
                    "p_adjusted": c.p_adjusted,
                    "family": c.family,
                    "df": c.df,
                    "verdict": c.verdict,
                    "test": c.test,
                    "restarts": list(c.starts) if c.starts else [len(v.runs), len(v.runs)],
                    "passes": c.passes,
                    "clear": c.is_clear(precision, min_effect_pct),
                }
            )
    return {
        "experiment": analysis.experiment.name,
        "baseline": analysis.experiment.baseline.name,
        "answer_metric": answer_metric(analysis.experiment).key,
        "precision_pct": precision,
        "min_effect_pct": min_effect_pct,
        "comparisons": rows,
    }
