"""A replay's latency verdicts per route (servelab.analysis.routes): paired by round,
Holm-adjusted over every route and variant, none for a variant whose replay was not
kept. Pure: runs made here."""

from __future__ import annotations

from support import fake_load, fake_run

from servelab.analysis.routes import route_verdicts
from servelab.results.records import NamedRequests, ReplayFidelity

KEPT = ReplayFidelity(
    speed=1.0, scheduled=100, sent=100, lag_p50_ms=0.1, lag_p99_ms=1.0, lag_max_ms=2.0,
    max_mix_error_points=0.0, ks_distance=0.02,
)
LATE = KEPT.model_copy(update={"lag_p99_ms": 40.0, "problems": ("the sender fell behind",)})


def named(route: str, p99_ms: float) -> NamedRequests:
    return NamedRequests(
        method="GET", name=route, requests=100, failures=0, rps=10.0, latency_mean_ms=1.0,
        latency_p50_ms=1.0, latency_p99_ms=p99_ms, latency_max_ms=p99_ms,
    )


def replayed(variant: str, repetition: int, routes: dict[str, float], fidelity=KEPT):
    load = fake_load(by_name=tuple(named(r, v) for r, v in routes.items()), replay=fidelity)
    return fake_run(variant, "replay", repetition, load=load)


def test_a_route_a_variant_slows_is_judged_worse_while_another_is_unchanged() -> None:
    runs = []
    for rep, drift in enumerate((1.0, 1.1, 0.95, 1.05, 1.0), start=1):
        runs.append(replayed("tcp", rep, {"/a": 10 * drift, "/b": 20 * drift}))
        # /a 50 % slower in every round, /b the same give or take 1 %
        b = 20 * drift * (1 + 0.01 * (-1) ** rep)
        runs.append(replayed("unix", rep, {"/a": 15 * drift, "/b": b, "/only-here": 1.0}))
    verdicts = {(v.route, v.variant): v.comparison for v in route_verdicts(runs, "tcp")}
    assert set(verdicts) == {("/a", "unix"), ("/b", "unix")}  # /only-here: not in tcp's runs
    a, b = verdicts[("/a", "unix")], verdicts[("/b", "unix")]
    assert a.verdict == "worse" and a.difference_pct is not None and a.difference_pct > 40
    assert b.verdict != "worse" and b.verdict != "better"
    assert a.family == 2  # Holm over both routes


def test_a_variant_whose_replay_was_not_kept_gets_no_verdict_on_any_route() -> None:
    runs = [replayed("tcp", rep, {"/a": 10.0 + rep}) for rep in (1, 2, 3)]
    runs += [replayed("unix", rep, {"/a": 30.0 + rep}, LATE if rep == 2 else KEPT)
             for rep in (1, 2, 3)]
    (verdict,) = route_verdicts(runs, "tcp")
    assert verdict.comparison.verdict == "not judged"
    assert "not kept in run 2 of unix" in verdict.comparison.reason


def test_no_replay_no_routes() -> None:
    assert route_verdicts([fake_run("tcp"), fake_run("unix")], "tcp") == []


def test_the_json_export_carries_each_routes_verdict() -> None:
    import json

    import pytest

    from servelab.prepare.building import experiment_from_dict
    from servelab.report.base import ReportInput
    from servelab.report.formats import output_format

    experiment = experiment_from_dict({
        "name": "e", "baseline": {"name": "tcp"}, "variants": [{"name": "unix"}],
        "workloads": [{"name": "replay", "load": {"duration_s": 2}}], "repetitions": 5,
    })
    runs = []
    for rep, drift in enumerate((1.0, 1.1, 0.95, 1.05, 1.0), start=1):
        runs += [replayed("tcp", rep, {"/a": 10 * drift}),
                 replayed("unix", rep, {"/a": 15 * drift})]
    export = output_format("json").export_renderer()
    document = json.loads(export(ReportInput.build(experiment, {}, runs)))
    (row,) = document["route_verdicts"]
    assert (row["route"], row["variant"], row["verdict"]) == ("/a", "unix", "worse")
    assert row["baseline_p99_ms"] == pytest.approx(10.2)
    assert row["p99_ms"] == pytest.approx(15.3)
    assert row["change_pct"] > 40 and row["family"] == 1 and row["interval_pct"][0] > 0
    plain = [fake_run("tcp", "replay"), fake_run("unix", "replay")]
    assert "route_verdicts" not in json.loads(export(ReportInput.build(experiment, {}, plain)))
