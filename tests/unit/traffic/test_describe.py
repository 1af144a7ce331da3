"""One pass over hand-built records: totals, rates, peaks, the series and the mix."""

from __future__ import annotations

import json

import pytest

from servelab.errors import SpecError
from servelab.traffic.describe import (
    OTHER_ROUTES,
    PATHS_COUNTED,
    SERIES_STEPS,
    Peak,
    describe,
)
from servelab.traffic.records import LogRecord
from servelab.traffic.routes import route_template

T0 = 1_714_953_600.0  # 2024-05-06 00:00:00 UTC, a whole minute


def record(t: float, target: str = "/", method: str = "GET", status: int | None = 200) -> LogRecord:
    return LogRecord(T0 + t, method, target, status)


def test_nothing_read_is_an_empty_summary() -> None:
    summary = describe([])
    assert summary.requests == 0 and summary.first_time is None and summary.series == ()
    assert summary.peak_second is None and summary.routes == ()
    assert json.loads(json.dumps(summary.as_json()))["requests"] == 0


def test_totals_rates_and_peaks() -> None:
    # 10 requests a second for 120 s, and 40 more in second 70: 1,240 in 120 whole seconds.
    records = [record(s + i / 10) for s in range(120) for i in range(10)]
    records += [record(70.5) for _ in range(40)]
    records.sort(key=lambda r: r.time)
    summary = describe(records)
    assert summary.requests == 1240
    assert summary.first_time == T0 and summary.last_time == T0 + 119.9
    assert summary.duration_s == 120
    assert summary.mean_rate == pytest.approx(1240 / 120)
    assert summary.mean_per_minute == pytest.approx(620)
    assert summary.peak_second == Peak(50, T0 + 70)
    assert summary.peak_minute == Peak(640, T0 + 60)  # the second minute holds the burst
    assert summary.series_step_s == 1
    assert len(summary.series) == 120
    assert summary.series[70] == (T0 + 70, 50.0)
    assert summary.series[0] == (T0, 10.0)


def test_quiet_seconds_are_in_the_series() -> None:
    summary = describe([record(0), record(0.5), record(5)])
    assert [rate for _, rate in summary.series] == [2, 0, 0, 0, 0, 1]
    assert summary.duration_s == 6 and summary.mean_rate == pytest.approx(0.5)


def test_one_record() -> None:
    summary = describe([record(3.25)])
    assert summary.duration_s == 1 and summary.mean_rate == 1
    assert summary.peak_second == Peak(1, T0 + 3) and summary.peak_minute == Peak(1, T0)


def test_a_slightly_late_record_counts_in_its_second() -> None:
    records = [record(0), record(1), record(2), record(1.5), record(20), record(1.2)]
    summary = describe(records)
    assert summary.peak_second == Peak(3, T0 + 1)
    assert summary.requests == 6


def test_a_long_log_keeps_its_series_per_minute() -> None:
    limit = SERIES_STEPS[0][1]
    # One request every 10 s for three hours: past the per-second series' span.
    records = [record(t) for t in range(0, int(limit) + 3600, 10)]
    summary = describe(records)
    assert summary.series_step_s == 60
    assert len(summary.series) == (limit + 3600) / 60
    assert all(rate == pytest.approx(0.1) for _, rate in summary.series)
    assert summary.peak_second == Peak(1, T0)
    assert summary.peak_minute == Peak(6, T0)
    assert summary.mean_rate == pytest.approx(len(records) / (limit + 3600 - 9))


def test_a_week_long_log_keeps_its_series_per_hour() -> None:
    records = [record(t) for t in range(0, 7 * 86400, 600)]
    summary = describe(records)
    assert summary.series_step_s == 3600
    assert len(summary.series) == 7 * 24
    assert summary.series[0] == (T0, 6 / 3600)


def test_the_mix_by_route_method_and_status() -> None:
    records = [
        record(0, "/items/1"), record(0.1, "/items/2?x=1"), record(0.2, "/items/3", "DELETE"),
        record(0.3, "/health", status=None),
        record(1, "/users/550e8400-e29b-41d4-a716-446655440000"),
        record(1.1, "/items/4", "POST", 201), record(1.2, "/missing", status=404),
    ]
    summary = describe(records)
    (items, *rest) = summary.routes
    assert items.route == "/items/{id}" and items.requests == 4
    assert items.share == pytest.approx(4 / 7)
    assert dict(items.methods) == {"GET": 2, "DELETE": 1, "POST": 1}
    assert items.methods[0] == ("GET", 2)
    assert sorted(r.route for r in rest) == ["/health", "/missing", "/users/{uuid}"]
    assert summary.methods == (("GET", 5), ("DELETE", 1), ("POST", 1))
    assert summary.statuses == ((200, 4), (201, 1), (404, 1), (None, 1))
    data = summary.as_json()
    assert data["statuses"] == {"200": 4, "201": 1, "404": 1, "-": 1}
    assert data["routes"][0] == {"route": "/items/{id}", "requests": 4,
                                 "share": pytest.approx(4 / 7),
                                 "methods": {"GET": 2, "DELETE": 1, "POST": 1},
                                 "paths": 4}  # /items/1 to 4: the query is no path's


def test_routes_past_the_bound_are_counted_together() -> None:
    records = [record(i / 100, f"/page-{chr(97 + i % 26)}{i // 26}") for i in range(60)]
    records += [record(1, "/page-a0")] * 30
    summary = describe(records, max_routes=10)
    assert len(summary.routes) == 11
    assert summary.routes[0].route == "/page-a0" and summary.routes[0].requests == 31
    assert summary.routes[-1].route == OTHER_ROUTES
    assert summary.routes[-1].requests == 50
    assert sum(r.requests for r in summary.routes) == 90


def test_it_reads_its_records_once() -> None:
    def once():
        yield from (record(i) for i in range(5))

    assert describe(once()).requests == 5


def test_fingerprinted_assets_are_one_route_and_each_route_counts_its_paths() -> None:
    """20 % of a shop's requests are its build's assets: one route per directory and
    extension, not one a file; a route counts its distinct paths up to PATHS_COUNTED."""
    records = [record(i * 0.01, f"/static/app.{i:06x}.css") for i in range(40)]
    records += [record(1 + i * 0.01, f"/static/chunk-{i + 4096:x}.js") for i in range(10)]
    records += [record(2 + i * 0.001, f"/items/{i}") for i in range(PATHS_COUNTED + 5)]
    records += [record(3, "/static/favicon.ico"), record(3, "/static/favicon.ico")]
    routes = {r.route: r for r in describe(records).routes}
    assert (routes["/static/{asset}.css"].requests, routes["/static/{asset}.css"].paths) == (
        40, 40)
    assert (routes["/static/{asset}.js"].requests, routes["/static/{asset}.js"].paths) == (
        10, 10)
    assert routes["/items/{id}"].paths == PATHS_COUNTED  # counted up to there
    assert (routes["/static/favicon.ico"].requests, routes["/static/favicon.ico"].paths) == (
        2, 1)


def test_route_templates_name_the_routes_the_heuristics_miss() -> None:
    records = [record(0, "/users/alice/profile"), record(0, "/users/bob/profile"),
               record(1, "/docs/guide/install"), record(1, "/users/42/profile")]
    templates = [route_template("/users/{name}/profile"), route_template("/docs/*")]
    routes = {r.route: r.paths for r in describe(records, templates=templates).routes}
    assert routes == {"/users/{name}/profile": 3, "/docs/*": 1}
    assert {r.route for r in describe(records).routes} == {
        "/users/alice/profile", "/users/bob/profile", "/users/{id}/profile",
        "/docs/guide/install"}
    with pytest.raises(SpecError):
        route_template("users/{name}")

