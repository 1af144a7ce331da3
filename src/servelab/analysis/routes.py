"""A replay's latency verdicts per route: each route's p99 (from each request's logged
time) of every variant against the baseline's, paired by round, Holm-adjusted over every
route and variant of the experiment. Pure.

A replay's Answer judges the whole log's p99; the routes' own verdicts say where a
variant gains or loses (the checkout may get slower while the home page gets faster). A
route is judged where every run of both variants answered it; a variant with a run whose
replay was not kept gets no verdict, as in the Answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from servelab.analysis.comparisons import compare_round_values
from servelab.analysis.family import judge_family
from servelab.analysis.stats import NOT_JUDGED, Comparison
from servelab.analysis.validity import replay_not_kept
from servelab.results.records import RunRecord


@dataclass(frozen=True)
class RouteVerdict:
    workload: str
    method: str
    route: str
    variant: str
    comparison: Comparison  # the route's p99 [ms], the variant's against the baseline's


def route_p99s(run: RunRecord) -> dict[tuple[str, str], float]:
    """(method, route) -> its p99 in ``run`` (a replay's routes; Locust's request names)."""
    return {(n.method, n.name): n.latency_p99_ms for n in run.load.by_name}


def route_verdicts(
    runs: Sequence[RunRecord], baseline: str, *, alpha: float = 0.05
) -> list[RouteVerdict]:
    """Every replayed workload's routes, each variant against ``baseline``; empty when no
    run replayed a log. Verdicts Holm-adjusted over all of them."""
    found: list[RouteVerdict] = []
    replayed = [r for r in runs if r.load.replay is not None]
    for workload in sorted({r.workload for r in replayed}):
        mine = [r for r in replayed if r.workload == workload]
        base = [r for r in mine if r.variant == baseline]
        if not base:
            continue
        for variant in sorted({r.variant for r in mine} - {baseline}):
            theirs = {r.repetition: route_p99s(r) for r in base}
            ours = {r.repetition: route_p99s(r) for r in mine if r.variant == variant}
            common = set.intersection(*(set(f) for f in (*theirs.values(), *ours.values())))
            why_not = replay_not_kept(mine, (baseline, variant))
            for method, route in sorted(common, key=lambda k: (k[1], k[0])):
                key = (method, route)
                comparison = compare_round_values(
                    {rep: f[key] for rep, f in theirs.items()},
                    {rep: f[key] for rep, f in ours.items()},
                    higher_is_better=False, alpha=alpha,
                )
                if why_not:
                    comparison = replace(comparison, verdict=NOT_JUDGED, reason=why_not)
                found.append(RouteVerdict(workload, method, route, variant, comparison))
    judged = judge_family([v.comparison for v in found], higher_is_better=False, alpha=alpha)
    return [replace(v, comparison=c) for v, c in zip(found, judged, strict=True)]


def route_verdicts_document(verdicts: Sequence[RouteVerdict]) -> list[dict[str, object]]:
    """The verdicts, machine-readable (the JSON export's ``route_verdicts``)."""
    rows: list[dict[str, object]] = []
    for v in verdicts:
        c = v.comparison
        rows.append({
            "workload": v.workload, "method": v.method, "route": v.route, "variant": v.variant,
            "baseline_p99_ms": c.baseline_mean, "p99_ms": c.variant_mean,
            "change_pct": c.difference_pct,
            "interval_pct": list(c.interval_pct) if c.interval_pct else None,
            "p_value": c.p_value, "p_adjusted": c.p_adjusted, "family": c.family,
            "verdict": c.verdict, "reason": c.reason,
        })
    return rows
