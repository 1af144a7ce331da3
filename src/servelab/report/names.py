"""Requests by name, for drivers that name each request (a locustfile's ``name=`` or its
URL): per workload, variant and request, the counts over the runs and the mean of the
runs' figures, with the failures by kind; and what the driver ran (its scenario and
User classes), from the runs' own record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.config.experiment import Experiment
from servelab.report.base import Table
from servelab.results.records import PER_RUN_DETAIL, NamedRequests, RunRecord

ABOUT = (
    "Each request name's figures as the load driver counted them (a replay: each route, "
    "its latency from each request's logged time): requests and failures added over the "
    "runs, requests/s and latencies the mean of the runs' (percentiles at the driver's "
    "resolution: Locust keeps whole milliseconds under 100 ms)."
)


@dataclass(frozen=True)
class NameRow:
    workload: str
    variant: str
    request: str  # "GET /books/"
    runs: int
    requests: int
    failures: int
    failures_by_kind: dict[str, int]
    rps: float
    mean_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    # The driver counted percentiles in whole milliseconds (Locust's): shown so.
    whole_ms: bool = True


def _ms(value: float, whole: bool) -> str:
    """A percentile at the resolution it was counted at: whole milliseconds (Locust's),
    else two decimals (a replay's)."""
    return f"{value:.0f}" if whole else f"{value:.2f}"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def name_rows(experiment: Experiment, runs: Sequence[RunRecord]) -> list[NameRow]:
    rows = []
    for workload in experiment.workloads:
        for stack in experiment.stacks:
            mine = [r for r in runs if r.variant == stack.name and r.workload == workload.name]
            named: dict[tuple[str, str], list[NamedRequests]] = {}
            for run in mine:
                for row in run.load.by_name:
                    named.setdefault((row.method, row.name), []).append(row)
            for (method, name), seen in sorted(named.items(), key=lambda kv: kv[0][1]):
                kinds: dict[str, int] = {}
                for r in seen:
                    for kind, n in r.failures_by_kind.items():
                        kinds[kind] = kinds.get(kind, 0) + n
                rows.append(
                    NameRow(
                        workload=workload.name,
                        variant=stack.name,
                        request=f"{method} {name}".strip(),
                        runs=len(seen),
                        requests=sum(r.requests for r in seen),
                        failures=sum(r.failures for r in seen),
                        failures_by_kind=kinds,
                        rps=_mean([r.rps for r in seen]),
                        mean_ms=_mean([r.latency_mean_ms for r in seen]),
                        p50_ms=_mean([r.latency_p50_ms for r in seen]),
                        p99_ms=_mean([r.latency_p99_ms for r in seen]),
                        max_ms=max(r.latency_max_ms for r in seen),
                        whole_ms=all(
                            float(v).is_integer()
                            for r in seen for v in (r.latency_p50_ms, r.latency_p99_ms)
                        ),
                    )
                )
    return rows


def names_table(experiment: Experiment, runs: Sequence[RunRecord]) -> Table | None:
    """One row per (workload, variant, request name); None when no run named requests."""
    rows = name_rows(experiment, runs)
    if not rows:
        return None
    return Table(
        (
            "Workload", "Variant", "Request", "Runs", "Requests", "Failed", "Failed by kind",
            "Requests/s", "Mean [ms]", "p50 [ms]", "p99 [ms]", "Max [ms]",
        ),
        tuple(
            (
                r.workload, r.variant, r.request, str(r.runs), f"{r.requests:,}",
                f"{r.failures:,}",
                ", ".join(f"{k}: {n:,}" for k, n in sorted(r.failures_by_kind.items())) or "-",
                f"{r.rps:,.1f}", f"{r.mean_ms:.2f}", _ms(r.p50_ms, r.whole_ms),
                _ms(r.p99_ms, r.whole_ms), f"{r.max_ms:.1f}",
            )
            for r in rows
        ),
        label_columns=3,
    )


def driver_lines(runs: Sequence[RunRecord]) -> list[str]:
    """What the driver ran, as its runs recorded it (e.g. scenario, User classes); details
    whose name starts with "per run: " (figures that differ from run to run) left out."""
    seen: dict[str, None] = {}
    for run in runs:
        details = {
            k: v for k, v in run.load.driver_details.items() if not k.startswith(PER_RUN_DETAIL)
        }
        if details:
            seen["; ".join(f"{k}: {v}" for k, v in details.items())] = None
    return list(seen)
