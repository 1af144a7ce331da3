"""From raw runs to conclusions: per-variant summaries, comparisons with the
baseline, and warnings — all as frozen data that every report renders alike.

Pure: no I/O. Warnings are values with a hint (hyperfine's idea), never prints.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from servelab.analysis.family import judge_family
from servelab.analysis.nested import DesignEffect, compare_design, starts_needed, transform
from servelab.analysis.stats import (
    NOT_JUDGED,
    Comparison,
    Summary,
    compare,
    compare_paired,
    confidence_interval,
    percent_change,
    runs_needed,
    summarize,
    verdict,
)
from servelab.analysis.validity import (
    BUSY_SHARE,
    as_measured,
    idle_stacks,
    latency_judged,
    not_judged_because,
)
from servelab.analysis.warnings import MACHINE_SPEED_SLICED_HINT, ResultWarning, WarningKind
from servelab.config.experiment import Experiment
from servelab.host.cpus import CpuPlan
from servelab.prepare.checks import describe_stack
from servelab.results.records import CPU_BOUND_MACHINES_DETAIL, RunRecord, SliceFigures

UNSTABLE_CV = 0.10  # pyperf warns from a standard deviation of 10 % of the mean
DRIVER_SATURATED = 0.90  # share of its CPUs the load driver may use before it is the bottleneck
# A driver process at most this busy leaves room; the processes a bottlenecked driver
# needs are its CPU work divided by it.
DRIVER_PROCESS_TARGET = 0.7
# The driver detail that says how to spread it over processes (the hint names it).
SCALE_WITH = "scale with"
# Other processes' share of the stack's CPUs during a run above which it is flagged.
NEIGHBOURS_SHARE = 0.05
# Rounds from which variants are compared with the baseline round by round (paired).
MIN_PAIRED_ROUNDS = 3
# CV of the stack CPU's own speed (servelab.observe.neighbours.cpu_speed) over an experiment's
# runs above which it is flagged: an idle 2-CPU VM here drifts by ~1-2 % in half a second.
MACHINE_SPEED_CV = 0.03
DEFAULT_PRECISION_PCT = 5.0
# A start whose busiest app worker used this many times the CPU of its least busy one
# is flagged: its requests were not spread over the workers.
UNEVEN_WORKERS = 1.5
UNEVEN_MIN_CPU_S = 0.2


def worker_split(run: RunRecord) -> tuple[float, float] | None:
    """CPU seconds of the run's busiest and least busy app worker (processes of role
    "app" that did at least 2 % of the app's work: a master that only supervises is
    left out, and so, for want of the worker count, is a worker that did nothing);
    None with fewer than two such workers."""
    app = [p.cpu_s for p in run.processes if p.role == "app"]
    total = sum(app)
    workers = [cpu for cpu in app if total and cpu >= 0.02 * total]
    if len(workers) < 2:
        return None
    return max(workers), min(workers)


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    value: Callable[[RunRecord], float] = field(repr=False, compare=False)
    # The same figure for one slice, and whether it is compared as a ratio (log scale).
    per_slice: Callable[[SliceFigures], float] = field(repr=False, compare=False)
    log_scale: bool = True
    # A percentile is compared from each start's own requests (its run's figure, computed
    # from every answered request), never from a mean of slice percentiles: a slice of
    # ~250 requests has a p99 of about its third-slowest request.
    pooled: bool = False
    short: str = ""  # how a sentence names it ("requests/s"); the label in lower case if ""

    @property
    def name(self) -> str:
        return self.short or self.label.lower()


def _ok_rps(s: SliceFigures) -> float:
    return (s.requests - s.error_count) / s.duration_s if s.duration_s > 0 else 0.0


METRICS: tuple[Metric, ...] = (
    Metric(
        "rps", "Requests per second", "req/s", True, lambda r: r.load.rps, lambda s: s.rps,
        short="requests/s",
    ),
    Metric(
        "latency_mean_ms",
        "Time per request",
        "ms",
        False,
        lambda r: r.load.latency_mean_ms,
        lambda s: s.latency_mean_ms,
    ),
    Metric(
        "latency_p99_ms",
        "p99 latency",
        "ms",
        False,
        lambda r: r.load.latency_p99_ms,
        lambda s: s.latency_p99_ms,
        pooled=True,
    ),
    Metric(
        "errors",
        "Errors",
        "requests",
        False,
        lambda r: float(r.load.errors),
        lambda s: float(s.error_count),
        log_scale=False,
    ),
    Metric(
        "ok_rps",
        "Successful requests per second",
        "req/s",
        True,
        lambda r: r.load.ok_rps,
        _ok_rps,
    ),
    # Side by side, each stack's requests/s is its share of a contended CPU, and a
    # stack that blocks more (a small socket buffer) gets a smaller share; requests per
    # CPU second of the stack is what it would serve with a CPU to itself when CPU-bound.
    Metric(
        "rps_per_cpu",
        "Requests per CPU second",
        "req/CPU-s",
        True,
        lambda r: r.load.requests_total / r.stack_cpu_s if r.stack_cpu_s > 0 else 0.0,
        lambda s: s.requests / s.stack_cpu_s if s.stack_cpu_s > 0 else 0.0,
    ),
)
METRIC_BY_KEY = {m.key: m for m in METRICS}


def answer_metric(experiment: Experiment) -> Metric:
    """The metric the answer (and the stopping rule) is about: requests/s, or requests
    per CPU second for stacks measured side by side (see ``rps_per_cpu``)."""
    return METRIC_BY_KEY["rps_per_cpu" if experiment.side_by_side else "rps"]


def compared_metrics(experiment: Experiment) -> tuple[Metric, ...]:
    """Metrics compared with the baseline: requests per CPU second only side by side."""
    return tuple(m for m in METRICS if m.key != "rps_per_cpu" or experiment.side_by_side)


@dataclass(frozen=True)
class MetricSummary:
    metric: str
    values: tuple[float, ...]
    summary: Summary
    interval: tuple[float, float] | None  # 95 % confidence interval of the mean


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


def _summaries(runs: Sequence[RunRecord]) -> dict[str, MetricSummary]:
    summaries = {}
    for metric in METRICS:
        values = tuple(metric.value(r) for r in runs)
        summaries[metric.key] = MetricSummary(
            metric.key, values, summarize(values), confidence_interval(values)
        )
    return summaries


@dataclass(frozen=True)
class _Runs:
    """One variant's runs of one workload, as the warning checks read them."""

    runs: Sequence[RunRecord]
    rps: MetricSummary
    precision_pct: float
    variant: str
    workload: str

    @property
    def by_design(self) -> bool:
        # Sliced runs are compared pass by pass: the spread between their whole-run
        # figures is the machine's drift, which the design takes out; the answer says
        # what is unclear.
        return is_sliced(self.runs)

    def warn(self, kind: WarningKind, message: str, **figures: Any) -> ResultWarning:
        return kind.warn(message, self.variant, self.workload, **figures)


def _unstable(c: _Runs) -> ResultWarning | None:
    s = c.rps.summary
    if s.n > 1 and s.cv >= UNSTABLE_CV and not c.by_design:
        return c.warn(
            WarningKind.UNSTABLE,
            f"requests/s varies by {100 * s.cv:.1f} % (std dev / mean) over {s.n} runs "
            f"(min {s.minimum:.0f}, max {s.maximum:.0f})",
        )
    return None


def _errors(c: _Runs) -> ResultWarning | None:
    errors = sum(r.load.errors for r in c.runs)
    if not errors:
        return None
    kinds: dict[str, int] = {}
    for run in c.runs:
        for code, n in run.load.status_counts.items():
            if code[0] not in "23":
                kinds[code] = kinds.get(code, 0) + n
        for kind, n in run.load.connection_errors.items():
            kinds[kind] = kinds.get(kind, 0) + n
    detail = ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items()))
    total = sum(r.load.requests_total for r in c.runs)
    return c.warn(WarningKind.ERRORS, f"{errors} of {total} requests failed ({detail})")


def _driver_saturated(c: _Runs) -> ResultWarning | None:
    for run in c.runs:
        n_cpus = len(run.driver_cpus.split(",")) if run.driver_cpus else None
        if n_cpus and run.load.duration_s > 0:
            share = run.load.driver_cpu_s / run.load.duration_s / n_cpus
            if share >= DRIVER_SATURATED:
                return c.warn(
                    WarningKind.DRIVER_SATURATED,
                    f"the load driver used {100 * share:.0f} % of its CPU in run "
                    f"{run.repetition}: the stack may be faster than measured",
                )
    return None


def _driver_bottleneck(c: _Runs) -> ResultWarning | None:
    """A driver whose processes each run on one core (Locust: one Python process each)
    near a full core, or that said so itself: the stack may be faster than measured."""
    worst = None
    for run in c.runs:
        load = run.load
        if load.duration_s <= 0 or not (load.driver_details or load.driver_overloaded):
            continue  # drivers that report neither are covered by driver-saturated
        per_process = load.driver_cpu_s / load.duration_s / load.driver_processes
        if (load.driver_overloaded or per_process >= DRIVER_SATURATED) and (
            worst is None or per_process > worst[1]
        ):
            worst = (run, per_process)
    if worst is None:
        return None
    run, per_process = worst
    load = run.load
    total = load.driver_cpu_s / load.duration_s  # cores' worth of work, all processes
    needed = max(load.driver_processes + 1, math.ceil(total / DRIVER_PROCESS_TARGET))
    said = "; the driver itself warned its CPU was above 90 %" if load.driver_overloaded else ""
    machines = load.driver_details.get(CPU_BOUND_MACHINES_DETAIL)
    if machines:  # its processes on other machines: their own figures
        text = (
            f"the load driver's workers on other machines ran near a full core in run "
            f"{run.repetition} ({machines}): they, not the stack, may set the pace"
        )
    else:
        text = (
            f"the load driver's {load.driver_processes} process(es) used "
            f"{100 * per_process:.0f} % of a core each in run {run.repetition}{said}: it, "
            "not the stack, may set the pace"
        )
    return c.warn(
        WarningKind.DRIVER_BOTTLENECK,
        text,
        needed=needed,
        how=load.driver_details.get(SCALE_WITH, "the driver's own option"),
    )


def _uneven_workers(c: _Runs) -> ResultWarning | None:
    uneven = [(run, split) for run in c.runs if (split := worker_split(run)) is not None]
    worst = max(uneven, key=lambda pair: pair[1][0] / pair[1][1], default=None)
    if worst is None:
        return None
    run, (busiest, idlest) = worst
    if busiest < UNEVEN_MIN_CPU_S or busiest < UNEVEN_WORKERS * idlest:
        return None  # too little work says nothing; or even enough
    return c.warn(
        WarningKind.UNEVEN_WORKERS,
        f"in run {run.repetition} the app's busiest worker used {busiest:.2f} CPU s, "
        f"its least busy {idlest:.2f}: requests spread unevenly over the workers "
        "(e.g. upstream keepalive connections held by one), a difference between "
        "stack starts that more starts average out",
    )


def _neighbours(c: _Runs) -> ResultWarning | None:
    shares = [r.neighbour_cpu_share for r in c.runs if r.neighbour_cpu_share is not None]
    if not shares or max(shares) < NEIGHBOURS_SHARE:
        return None
    worst = max(shares)
    run = next(r for r in c.runs if r.neighbour_cpu_share == worst)
    return c.warn(
        WarningKind.NEIGHBOURS,
        f"other processes and the hypervisor (steal) took {100 * worst:.0f} % of the "
        f"stack's CPUs in run {run.repetition} (mean over runs "
        f"{100 * sum(shares) / len(shares):.0f} %): that run measured the machine's other "
        "work too",
    )


def _too_few_runs(c: _Runs) -> ResultWarning | None:
    needed = None if c.by_design else runs_needed(c.rps.values, c.precision_pct)
    if needed is None or needed <= c.rps.summary.n:
        return None
    return c.warn(
        WarningKind.TOO_FEW_RUNS,
        f"a ±{c.precision_pct:g} % answer on requests/s needs about {needed} runs; "
        f"this has {c.rps.summary.n}",
        needed=needed,
    )


# Each variant's checks, in the order their warnings are listed.
_VARIANT_CHECKS = (
    _unstable, _errors, _driver_saturated, _driver_bottleneck, _uneven_workers, _neighbours,
    _too_few_runs,
)


def _variant_warnings(
    runs: Sequence[RunRecord],
    metrics: dict[str, MetricSummary],
    precision_pct: float,
    variant: str,
    workload: str,
) -> list[ResultWarning]:
    checked = _Runs(runs, metrics["rps"], precision_pct, variant, workload)
    return [w for check in _VARIANT_CHECKS if (w := check(checked)) is not None]


def analyze(
    experiment: Experiment,
    runs: Sequence[RunRecord],
    *,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
    precision_pct: float = DEFAULT_PRECISION_PCT,
) -> ExperimentAnalysis:
    """Every variant of every workload summarised and compared with the baseline.

    Each comparison is made by the test its design allows (``compare_variants``); a
    metric the design cannot vouch for is shown without a verdict (``validity``); the
    verdicts of each metric are judged together over the whole experiment, Holm-adjusted
    (``family``), so that identical stacks are called different in at most ``alpha``
    of experiments, however many questions they ask."""
    probed = list(runs)
    experiment, runs = as_measured(experiment, runs)
    compared: dict[tuple[str, str], dict[str, Comparison]] = {}
    for workload in experiment.workloads:
        workload_runs = [r for r in runs if r.workload == workload.name]
        if not any(r.variant == experiment.baseline.name for r in workload_runs):
            continue
        for stack in experiment.variants:
            if not any(r.variant == stack.name for r in workload_runs):
                continue
            found = {}
            for metric in compared_metrics(experiment):
                comparison = compare_variants(
                    workload_runs, experiment.baseline.name, stack.name, metric, alpha=alpha,
                    min_effect_pct=min_effect_pct,
                )
                why = not_judged_because(experiment, workload, metric.key)
                if why is not None:
                    comparison = replace(
                        comparison, verdict=NOT_JUDGED, reason=why, p_value=None
                    )
                found[metric.key] = comparison
            compared[(workload.name, stack.name)] = found
    for metric in compared_metrics(experiment):
        keys = [key for key, found in compared.items() if metric.key in found]
        judged = judge_family(
            [compared[key][metric.key] for key in keys],
            higher_is_better=metric.higher_is_better, alpha=alpha, min_effect_pct=min_effect_pct,
        )
        for key, comparison in zip(keys, judged, strict=True):
            compared[key][metric.key] = comparison
    variants = []
    for workload in experiment.workloads:
        for stack in experiment.stacks:
            own = sorted(
                (r for r in runs if r.variant == stack.name and r.workload == workload.name),
                key=lambda r: r.repetition,
            )
            if not own:
                continue
            metrics = _summaries(own)
            variants.append(
                VariantAnalysis(
                    workload.name,
                    stack.name,
                    describe_stack(stack),
                    stack.name == experiment.baseline.name,
                    tuple(own),
                    metrics,
                    compared.get((workload.name, stack.name), {}),
                    tuple(
                        _variant_warnings(own, metrics, precision_pct, stack.name, workload.name)
                    ),
                )
            )
    warnings = _experiment_warnings(experiment, runs, variants)
    idle = idle_stacks(probed)
    if idle:
        worst = min(idle, key=lambda r: r.solo_cpu_share or 0.0)
        warnings.append(
            WarningKind.NOT_CPU_BOUND.warn(
                f"{worst.variant} alone kept {100 * (worst.solo_cpu_share or 0.0):.0f} % of "
                f"its CPUs busy on {worst.workload} ({len(idle)} stack(s) below "
                f"{100 * BUSY_SHARE:.0f} %): it waits on something, so requests per CPU "
                "second side by side is not what it serves with a CPU to itself; measured "
                "in turns from there on, and only those runs are compared"
            )
        )
    return ExperimentAnalysis(experiment, tuple(variants), tuple(warnings))


def _experiment_warnings(
    experiment: Experiment, runs: Sequence[RunRecord], variants: Sequence[VariantAnalysis]
) -> list[ResultWarning]:
    """The warnings about the whole experiment: the load model, the machine, the CPUs."""
    warnings = []
    # Where no latency is judged at all, the Answer says so and why (answer.latency_note).
    if latency_judged(experiment) and any(w.load.model == "closed" for w in experiment.workloads):
        warnings.append(
            WarningKind.CLOSED_LOOP.warn(
                "latency is closed-loop: each client waits for its answer before sending again, "
                "so a slow server also slows the arrivals (coordinated omission); real users' "
                "latency under the same load would be higher",
            )
        )
    speeds = [r.cpu_speed for r in runs if r.cpu_speed is not None]
    if len(speeds) > 1:
        spread = summarize(speeds)
        if spread.cv >= MACHINE_SPEED_CV:
            drift = (
                f"the machine's own speed drifted between runs: a fixed CPU loop on the "
                f"stack's CPU ran {100 * (spread.maximum / spread.minimum - 1):.0f} % faster "
                f"at best than at worst (CV {100 * spread.cv:.1f} % over {spread.n} runs)"
            )
            if not any(w.kind is WarningKind.NEIGHBOURS for v in variants for w in v.warnings):
                drift += ", with no other process on that CPU to blame"
            if experiment.slices > 1:
                warnings.append(
                    ResultWarning(
                        WarningKind.MACHINE_SPEED,
                        f"{drift}; the runs were measured in interleaved slices, so the drift "
                        "fell on every run alike, and absolute figures are an average over it",
                        MACHINE_SPEED_SLICED_HINT,
                    )
                )
            else:
                warnings.append(
                    WarningKind.MACHINE_SPEED.warn(
                        f"{drift}; differences between variants of that size are within the "
                        "machine's own drift",
                    )
                )
    plans = {(r.stack_cpus, r.driver_cpus) for r in runs}
    if any(CpuPlan(stack, driver).shared for stack, driver in plans):
        warnings.append(
            WarningKind.SHARED_CPUS.warn("the load driver and the stack shared CPUs in some runs")
        )
    return warnings


def verdict_line(metric: Metric, comparison: Comparison) -> str:
    """'Requests per second: better, +22.21 % (95 % CI +15.0 … +29.4 %), p = 0.003'."""
    parts = [f"{metric.label}: {comparison.verdict}"]
    if comparison.difference_pct is not None:
        parts.append(f", {comparison.difference_pct:+.2f} %")
    else:
        parts.append(f", {comparison.difference:+.3g} {metric.unit}")
    if comparison.interval is not None:
        low, high = comparison.interval
        if comparison.baseline_mean:
            scale = 100.0 / comparison.baseline_mean
            parts.append(f" (95 % CI {low * scale:+.1f} … {high * scale:+.1f} %)")
        else:
            parts.append(f" (95 % CI {low:+.3g} … {high:+.3g} {metric.unit})")
    parts.append(f"; {comparison.reason}")
    return "".join(parts)


def compare_rounds(
    baseline: Sequence[RunRecord],
    variant: Sequence[RunRecord],
    metric: Metric,
    *,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
) -> Comparison:
    """A variant against the baseline of the same experiment: paired by round when both
    were measured in the same rounds, at least 3 (servelab's interleaved plan; a
    drift of the machine between rounds then cancels out), else Welch's test on the
    two samples (with 2 rounds a paired test has 1 degree of freedom, Welch's ~2)."""
    return compare_round_values(
        {r.repetition: metric.value(r) for r in baseline},
        {r.repetition: metric.value(r) for r in variant},
        higher_is_better=metric.higher_is_better, alpha=alpha, min_effect_pct=min_effect_pct,
    )


def compare_round_values(
    by_round: Mapping[int, float],
    mine: Mapping[int, float],
    *,
    higher_is_better: bool,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
) -> Comparison:
    """:func:`compare_rounds` on figures already taken from the runs (round -> value)."""
    higher = higher_is_better
    if by_round.keys() == mine.keys() and len(mine) >= MIN_PAIRED_ROUNDS:
        rounds = sorted(mine)
        paired = compare_paired(
            [by_round[n] for n in rounds], [mine[n] for n in rounds],
            higher_is_better=higher, alpha=alpha, min_effect_pct=min_effect_pct,
        )
        return replace(paired, reason=f"paired by round, {paired.reason}", test="paired t-test")
    return compare(
        list(by_round.values()), list(mine.values()),
        higher_is_better=higher, alpha=alpha, min_effect_pct=min_effect_pct,
    )


def compare_variants(
    runs: Sequence[RunRecord],
    baseline: str,
    variant: str,
    metric: Metric,
    *,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
) -> Comparison:
    """``variant`` against ``baseline`` among ``runs`` (one workload's, of one experiment),
    by the test the design allows: nested over starts when every run was sliced, paired
    by round or Welch's otherwise. Every report's verdicts come from here."""
    pair = [r for r in runs if r.variant in (baseline, variant)]
    if is_sliced(pair):
        return compare_starts(
            runs, baseline, variant, metric, alpha=alpha, min_effect_pct=min_effect_pct
        )
    return compare_rounds(
        sorted((r for r in pair if r.variant == baseline), key=lambda r: r.repetition),
        sorted((r for r in pair if r.variant == variant), key=lambda r: r.repetition),
        metric,
        alpha=alpha,
        min_effect_pct=min_effect_pct,
    )


def is_sliced(runs: Sequence[RunRecord]) -> bool:
    """True when every run kept its slices' figures (interleaved measurement)."""
    return bool(runs) and all(r.slice_figures for r in runs)


def slice_design(
    runs: Sequence[RunRecord], metric: Metric, log_scale: bool
) -> dict[str, dict[int, dict[int, float]]]:
    """variant -> start -> pass -> the metric of that slice (in the analysed scale)."""
    design: dict[str, dict[int, dict[int, float]]] = {}
    for run in runs:
        design.setdefault(run.variant, {})[run.repetition] = {
            s.pass_number: transform(metric.per_slice(s), log_scale) for s in run.slice_figures
        }
    return design


def pooled_design(
    runs: Sequence[RunRecord], metric: Metric, log_scale: bool
) -> dict[str, dict[int, dict[int, float]]]:
    """variant -> start -> the start's own figure (from all its requests), keyed by its
    round so that the starts of one round are compared with each other (a block)."""
    design: dict[str, dict[int, dict[int, float]]] = {}
    for run in runs:
        design.setdefault(run.variant, {})[run.repetition] = {
            run.repetition: transform(metric.value(run), log_scale)
        }
    return design


def compare_starts(
    runs: Sequence[RunRecord],
    baseline: str,
    variant: str,
    metric: Metric,
    *,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
) -> Comparison:
    """A variant against the baseline in an interleaved design (``runs``: every run of one
    workload, all sliced): slices centred on their pass, starts as the unit that varies
    (``servelab.analysis.nested``); rates and latencies as ratios, errors as differences."""
    if metric.pooled:
        values = [metric.value(r) for r in runs]
    else:
        values = [metric.per_slice(s) for r in runs for s in r.slice_figures]
    log_scale = metric.log_scale and all(v > 0 for v in values)
    mine = [metric.value(r) for r in runs if r.variant == variant]
    theirs = [metric.value(r) for r in runs if r.variant == baseline]
    base_mean = statistics.fmean(theirs) if theirs else 0.0
    var_mean = statistics.fmean(mine) if mine else 0.0

    def result(
        pct: float | None,
        interval: tuple[float, float] | None,
        p: float | None,
        verdict: str,
        reason: str,
        effect: DesignEffect | None = None,
    ) -> Comparison:
        return Comparison(
            base_mean,
            var_mean,
            var_mean - base_mean,
            pct,
            interval,
            p,
            verdict,
            reason,
            test="nested t-test over stack starts",
            starts=effect.starts if effect else (len(theirs), len(mine)),
            passes=effect.passes if effect else None,
            df=effect.df if effect else None,
        )

    if values and len(set(values)) == 1:
        return result(
            0.0 if base_mean else None,
            (0.0, 0.0),
            None,
            "no difference",
            "identical in every slice",
        )
    design = pooled_design(runs, metric, log_scale) if metric.pooled else slice_design(
        runs, metric, log_scale
    )
    effect = compare_design(
        design,
        baseline,
        variant,
        log_scale=log_scale,
        level=1 - alpha,
    )
    if effect is None:
        return result(
            percent_change(base_mean, var_mean),
            None,
            None,
            "inconclusive",
            "needs a variant started at least twice",
        )
    pct: float | None
    if log_scale:
        pct, low, high = (100 * math.expm1(x) for x in (effect.estimate, effect.low, effect.high))
        # The interval in the metric's unit, around the baseline's mean (reports scale it
        # back to percent of that mean).
        interval = (base_mean * low / 100, base_mean * high / 100)
    else:
        per_slice = (
            [metric.value(r) for r in runs if r.variant == baseline] if metric.pooled else [
                metric.per_slice(s) for r in runs if r.variant == baseline
                for s in r.slice_figures
            ]
        )
        level = statistics.fmean(per_slice) if per_slice else 0.0
        scale = base_mean / level if level else 1.0
        pct = 100 * effect.estimate / level if level else None
        interval = (effect.low * scale, effect.high * scale)
    where = (
        f"{effect.starts[0]} + {effect.starts[1]} starts, {effect.passes} passes, {effect.df} df"
    )
    if effect.p_value is None:
        return result(pct, interval, None, "no difference", f"{where}: identical")
    said, why = verdict(
        effect.p_value, pct, effect.estimate, higher_is_better=metric.higher_is_better,
        alpha=alpha, min_effect_pct=min_effect_pct,
    )
    return result(pct, interval, effect.p_value, said, f"{where}, {why}", effect)


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


def compare_results(
    first: Sequence[RunRecord],
    second: Sequence[RunRecord],
    *,
    min_effect_pct: float = 0.0,
    experiment: Experiment | None = None,
) -> dict[tuple[str, str], dict[str, Comparison]]:
    """For every (workload, variant) in both result sets: ``second`` against ``first``.
    With ``experiment`` (second's), a metric its design cannot vouch for is shown without
    a verdict, as in its own report; each metric's verdicts are Holm-adjusted over the
    pairs compared."""
    keys = sorted(
        {(r.workload, r.variant) for r in first} & {(r.workload, r.variant) for r in second}
    )
    workloads = {w.name: w for w in experiment.workloads} if experiment else {}
    compared: dict[tuple[str, str], dict[str, Comparison]] = {}
    for workload, variant in keys:
        a = [r for r in first if (r.workload, r.variant) == (workload, variant)]
        b = [r for r in second if (r.workload, r.variant) == (workload, variant)]
        found = {}
        for m in METRICS:
            comparison = compare(
                [m.value(r) for r in a],
                [m.value(r) for r in b],
                higher_is_better=m.higher_is_better,
                min_effect_pct=min_effect_pct,
            )
            why = None
            if experiment is not None and workload in workloads:
                why = not_judged_because(experiment, workloads[workload], m.key)
            if why is not None:
                comparison = replace(comparison, verdict=NOT_JUDGED, reason=why, p_value=None)
            found[m.key] = comparison
        compared[(workload, variant)] = found
    for m in METRICS:
        judged = judge_family(
            [compared[key][m.key] for key in keys],
            higher_is_better=m.higher_is_better, min_effect_pct=min_effect_pct,
        )
        for key, comparison in zip(keys, judged, strict=True):
            compared[key][m.key] = comparison
    return compared


def summary_line(metric: Metric, summary: MetricSummary) -> str:
    """'Requests per second: mean 2150.4, median 2166.6, sd 45.2 (CV 2.10 %), ...'."""
    s = summary.summary
    cv = "n/a" if s.mean == 0 else f"{100 * s.cv:.2f} %"
    text = (
        f"{metric.label}: mean {s.mean:.1f}, median {s.median:.1f}, sd {s.stdev:.1f} "
        f"(CV {cv}), min {s.minimum:.1f}, max {s.maximum:.1f}"
    )
    if summary.interval is not None:
        text += f", 95 % CI {summary.interval[0]:.1f} … {summary.interval[1]:.1f}"
    return text + f" {metric.unit} over {s.n} runs"


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
