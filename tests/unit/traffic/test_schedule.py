"""The replay schedule: filters, bodies, spreading whole seconds, anonymising, files."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.errors import SpecError
from servelab.traffic.records import LogRecord
from servelab.traffic.schedule import (
    NO_BODY,
    BodyTemplate,
    ReplayFilter,
    anonymised,
    build_schedule,
    read_schedule_file,
)

T0 = 1_800_000_000.0


def record(
    at: float, target: str = "/items/1", method: str = "GET", status: int = 200
) -> LogRecord:
    return LogRecord(T0 + at, method, target, status)


def test_times_are_offsets_from_the_first_request_and_whole_seconds_spread_within_them() -> None:
    records = [record(0), record(0), record(0), record(1), record(3)]
    schedule = build_schedule(records, seed=1)
    offsets = [r.offset_s for r in schedule.requests]
    assert schedule.whole_seconds
    assert offsets == sorted(offsets)
    assert all(0 <= o < 1 for o in offsets[:3]) and len(set(offsets[:3])) == 3
    assert 1 <= offsets[3] < 2 and 3 <= offsets[4] < 4
    assert schedule.duration_s == 4  # through the end of the last logged second
    assert build_schedule(records, seed=1) == schedule  # seeded: the same schedule


def test_sub_second_times_are_kept_as_logged() -> None:
    schedule = build_schedule([record(0.25), record(0.5), record(2.125)])
    assert not schedule.whole_seconds
    assert [r.offset_s for r in schedule.requests] == [0.0, 0.25, 1.875]


def test_filters_keep_the_window_routes_methods_and_statuses() -> None:
    records = [
        record(0, "/items/1"), record(1, "/items/2", status=404), record(2, "/users/3"),
        record(3, "/items/4", method="DELETE"), record(10, "/items/5"),
    ]
    keep = ReplayFilter(start_s=0, end_s=5, routes=("/items/*",), methods=("GET",),
                        statuses=("2xx",))
    schedule = build_schedule(records, keep)
    assert [r.target for r in schedule.requests] == ["/items/1"]
    assert schedule.read == 5 and schedule.filtered_out == 4
    assert schedule.duration_s == 5


def test_route_patterns_match_the_grouped_route() -> None:
    schedule = build_schedule([record(0, "/items/7"), record(0, "/other")],
                              ReplayFilter(routes=("/items/{id}",)))
    assert [r.route for r in schedule.requests] == ["/items/{id}"]


def test_a_request_with_a_body_needs_a_template_else_it_is_left_out_and_counted() -> None:
    records = [record(0, "/sync/items/", "POST"), record(0, "/async/items/", "POST"),
               record(1, "/async/items/", "POST"), record(1, "/health")]
    bodies = {"/sync/*": BodyTemplate('{"name": "x"}')}
    schedule = build_schedule(records, bodies=bodies)
    assert sorted((r.target, r.body) for r in schedule.requests) == [
        ("/health", NO_BODY), ("/sync/items/", 0)
    ]
    assert schedule.no_body == {"/async/items/": 2}
    assert schedule.bodies == (BodyTemplate('{"name": "x"}'),)


def test_anonymising_replaces_query_values_with_stable_tokens() -> None:
    a = anonymised("/search?q=alice&page=2")
    assert a.startswith("/search?q=") and "alice" not in a and "page=" in a
    assert anonymised("/search?q=alice&page=2") == a
    assert anonymised("/search?q=bob&page=2") != a
    assert anonymised("/plain") == "/plain"
    schedule = build_schedule([record(0, "/s?email=x@y.z")], anonymise=True)
    assert "x@y.z" not in schedule.requests[0].target


@pytest.mark.parametrize(
    "keep", [ReplayFilter(start_s=5, end_s=5), ReplayFilter(statuses=("2x",))]
)
def test_a_bad_filter_is_one_line(keep: ReplayFilter) -> None:
    with pytest.raises(SpecError):
        build_schedule([record(0)], keep)


def test_an_empty_log_and_too_many_requests_are_refused() -> None:
    with pytest.raises(SpecError, match="no request"):
        build_schedule([])
    with pytest.raises(SpecError, match="more than 2"):
        build_schedule([record(0), record(0), record(1)], max_requests=2)


def test_peak_and_mean_rate_scale_with_the_speed() -> None:
    schedule = build_schedule([record(0.1 * i) for i in range(20)])  # 10 req/s for 2 s
    assert schedule.peak_rate() == 10
    assert schedule.peak_rate(2.0) == 20
    assert schedule.mean_rate(2.0) == pytest.approx(2 * schedule.mean_rate())


def test_the_written_file_reads_back(tmp_path: Path) -> None:
    schedule = build_schedule([record(0.5, "/a/1?x=1"), record(1.5, "/a/2"), record(2, "/b")])
    path = tmp_path / "s.tsv"
    schedule.write(path)
    back = read_schedule_file(path)
    assert back.due_s == (0.0, 1.0, 1.5)
    assert back.routes == {"/a/{id}": 2, "/b": 1}
    assert back.duration_s == schedule.duration_s
    assert path.with_suffix(".bodies.json").read_text() == "[]"
