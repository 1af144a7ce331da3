"""The seeds' own latency figures, as ab prints them, for experiments driven by ab.

ab's "Time per request" is two throughput figures, not latencies: the mean
is concurrency x wall time / requests, and "across all concurrent requests"
is wall time / requests (1000 / requests per second). The Django seed quotes
them ("~37 ms", "28 ms"), so an ab experiment's report shows them per variant
beside the measured mean latency, recomputed from each run's own figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.analysis.stats import summarize
from servelab.config.experiment import Experiment
from servelab.registry import capabilities
from servelab.report.base import Table
from servelab.results.records import RunRecord

ABOUT = (
    "ab's two figures, mean over runs: concurrency x wall time / requests, and wall "
    "time / requests (1000 / requests per second); beside them the mean of each "
    "request's own time."
)


@dataclass(frozen=True)
class TimePerRequestRow:
    workload: str
    variant: str
    runs: int
    mean_ms: float  # ab: "Time per request ... (mean)"
    across_all_ms: float  # ab: "... (mean, across all concurrent requests)"
    latency_ms: float  # the mean of every request's own time
    failed: int


def time_per_request_rows(
    experiment: Experiment, runs: Sequence[RunRecord]
) -> list[TimePerRequestRow]:
    rows = []
    for workload in experiment.workloads:
        concurrency = workload.load.concurrency
        for stack in experiment.stacks:
            mine = [
                r
                for r in runs
                if r.variant == stack.name and r.workload == workload.name
                and r.load.requests_total > 0
            ]
            if not mine:
                continue
            across = [1000 * r.load.duration_s / r.load.requests_total for r in mine]
            rows.append(
                TimePerRequestRow(
                    workload=workload.name,
                    variant=stack.name,
                    runs=len(mine),
                    mean_ms=summarize([concurrency * a for a in across]).mean,
                    across_all_ms=summarize(across).mean,
                    latency_ms=summarize([r.load.latency_mean_ms for r in mine]).mean,
                    failed=sum(r.load.errors for r in mine),
                )
            )
    return rows


def time_per_request_table(experiment: Experiment, runs: Sequence[RunRecord]) -> Table | None:
    """ab's figures per (workload, variant); None unless its driver prints them."""
    prints_them = "time_per_request" in capabilities(experiment.driver)
    rows = time_per_request_rows(experiment, runs) if prints_them else []
    if not rows:
        return None
    return Table(
        (
            "Workload", "Variant", "Runs", "Time per request, mean [ms]",
            "Across all concurrent requests [ms]", "Mean latency [ms]", "Failed requests",
        ),
        tuple(
            (
                r.workload, r.variant, str(r.runs), f"{r.mean_ms:.2f}", f"{r.across_all_ms:.2f}",
                f"{r.latency_ms:.2f}", str(r.failed),
            )
            for r in rows
        ),
        label_columns=2,
    )
