"""The figures every run is summarised and compared by (requests/s, latency, errors,
requests per CPU second), and each variant's summary of them. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from servelab.analysis.stats import Summary, confidence_interval, summarize
from servelab.config.experiment import Experiment
from servelab.config.thresholds import parse_threshold
from servelab.results.records import RunRecord, SliceFigures

DEFAULT_PRECISION_PCT = 5.0


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
    per CPU second for stacks measured side by side (see ``rps_per_cpu``); p99 latency
    for replayed access logs, whose requests/s is the log's own whatever the stack."""
    if all(w.load.model == "replay" for w in experiment.workloads):
        return METRIC_BY_KEY["latency_p99_ms"]
    return METRIC_BY_KEY["rps_per_cpu" if experiment.side_by_side else "rps"]


def compared_metrics(experiment: Experiment) -> tuple[Metric, ...]:
    """Metrics compared with the baseline: requests per CPU second only side by side, or
    where a threshold is on it (`servelab check --fail-if "rps_per_cpu < -5%"`)."""
    asked = experiment.stopping is not None and any(
        parse_threshold(text).metric == "rps_per_cpu" for text in experiment.stopping.thresholds
    )
    return tuple(
        m for m in METRICS if m.key != "rps_per_cpu" or experiment.side_by_side or asked
    )



@dataclass(frozen=True)
class MetricSummary:
    metric: str
    values: tuple[float, ...]
    summary: Summary
    interval: tuple[float, float] | None  # 95 % confidence interval of the mean



def summaries(runs: Sequence[RunRecord]) -> dict[str, MetricSummary]:
    summaries = {}
    for metric in METRICS:
        values = tuple(metric.value(r) for r in runs)
        summaries[metric.key] = MetricSummary(
            metric.key, values, summarize(values), confidence_interval(values)
        )
    return summaries



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


