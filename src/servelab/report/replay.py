"""Replay fidelity, for experiments that replayed an access log: how faithfully each run's
sender kept the log's schedule (``LoadMeasurement.replay``; servelab.traffic.fidelity)."""

from __future__ import annotations

from collections.abc import Sequence

from servelab.analysis.routes import route_verdicts
from servelab.report.base import Table
from servelab.results.records import RunRecord
from servelab.traffic.fidelity import MAX_LAG_P99_MS

ABOUT = (
    "Each replayed run: how late its requests went out against the log's schedule "
    "(send lag p50 and p99: latency counts from each request's intended time, so a late "
    "send is in the latency too), the largest difference between a route's share of the "
    "requests sent and of the log's (percentage points), and the Kolmogorov-Smirnov "
    "distance between the inter-arrival times sent and scheduled (0: the same). A run "
    f"whose send lag p99 passed {MAX_LAG_P99_MS:g} ms or that left requests unsent was not "
    "kept, and its variant gets no verdict."
)


def fidelity_table(runs: Sequence[RunRecord]) -> Table | None:
    """A row per replayed run; None when no run replayed a log."""
    replayed = [r for r in runs if r.load.replay is not None]
    if not replayed:
        return None
    rows = []
    for run in sorted(replayed, key=lambda r: (r.workload, r.variant, r.repetition)):
        f = run.load.replay
        assert f is not None
        rows.append((
            run.workload, run.variant, str(run.repetition), f"{f.speed:g}",
            f"{f.sent:,} of {f.scheduled:,}", f"{f.lag_p50_ms:.2f}", f"{f.lag_p99_ms:.2f}",
            f"{f.max_mix_error_points:.2f}", f"{f.ks_distance:.3f}",
            "yes" if f.kept else f"no: {'; '.join(f.problems)}",
        ))
    return Table(
        ("Workload", "Variant", "Run", "Speed", "Sent", "Send lag p50 [ms]",
         "Send lag p99 [ms]", "Mix error [points]", "Inter-arrival KS", "Kept"),
        tuple(rows), label_columns=3,
    )


ROUTES_ABOUT = (
    "Each route's p99 latency (from each request's logged time) of every variant against "
    "the baseline's, paired by round, 95 % intervals, verdicts Holm-adjusted over every "
    "route and variant. The Answer judges the whole log's p99; these say where a variant "
    "gains or loses. A variant with a replay not kept gets no verdict."
)


def route_verdict_table(runs: Sequence[RunRecord], baseline: str) -> Table | None:
    """A row per replayed route and variant; None when no run replayed a log."""
    verdicts = route_verdicts(runs, baseline)
    if not verdicts:
        return None
    rows = []
    for v in verdicts:
        c = v.comparison
        bounds = c.interval_pct
        rows.append((
            v.workload, f"{v.method} {v.route}", v.variant, f"{c.baseline_mean:.2f}",
            f"{c.variant_mean:.2f}",
            f"{c.difference_pct:+.1f} %" if c.difference_pct is not None else "-",
            f"{bounds[0]:+.1f} … {bounds[1]:+.1f} %" if bounds is not None else "-",
            c.verdict,
        ))
    return Table(
        ("Workload", "Route", "Variant", "Baseline p99 [ms]", "p99 [ms]", "Change",
         "95 % CI", "Verdict"),
        tuple(rows), label_columns=3,
    )
