"""Synthetic access logs: the requested mean rate, a Zipf mix, bursts, the day's curve,
the same lines for the same seed, and lines in the combined format."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from servelab.errors import SpecError
from servelab.traffic.describe import TrafficSummary, describe
from servelab.traffic.formats import log_format
from servelab.traffic.records import LogRecord
from servelab.traffic.synthetic import APPS, synthetic_log, write_synthetic_log

# The line's shape, field by field (the parser below reads only some of them).
COMBINED = re.compile(
    r'(?P<address>[\d.]+) - - \[(?P<time>[^\]]+)\] "(?P<method>[A-Z]+) (?P<target>\S+) '
    r'HTTP/1\.1" (?P<status>\d{3}) (?P<size>\d+) "(?P<referer>[^"]*)" "(?P<agent>[^"]+)"'
)
PARSER = log_format("combined")


def records(lines: list[str]) -> list[LogRecord]:
    """The lines read as the combined format, every one readable."""
    found = [PARSER.parse(line) for line in lines]
    assert None not in found
    return [record for record in found if record is not None]


def summary_of(app: str, duration_s: float, rate: float, **options: Any) -> TrafficSummary:
    return describe(records(list(synthetic_log(app, duration_s, rate, **options))))


@pytest.mark.parametrize("app", sorted(APPS))
def test_the_mean_rate_is_the_one_asked_for(app: str) -> None:
    summary = summary_of(app, 600, 30, seed=3)
    assert summary.mean_rate == pytest.approx(30, rel=0.03)
    assert summary.duration_s == pytest.approx(600, abs=2)
    assert {code for code, _ in summary.statuses} == {200}


def test_the_mix_is_zipf_ordered() -> None:
    summary = summary_of("sleepy", 600, 30, seed=1)
    shares = {r.route: r.share for r in summary.routes}
    assert list(shares) == ["/products/{id}", "/", "/search", "/api/v1/users/{uuid}/orders",
                            "/api/v1/cart/items", "/static/app.css", "/health"]
    first, second, third = list(shares.values())[:3]
    assert first / second == pytest.approx(2, rel=0.1)  # rank**-1: 1, 1/2, 1/3
    assert first / third == pytest.approx(3, rel=0.1)
    assert dict(summary.methods) == {"GET": pytest.approx(sum(
        r.requests for r in summary.routes if r.route != "/api/v1/cart/items")),
        "POST": next(r.requests for r in summary.routes if r.route == "/api/v1/cart/items")}


def test_ids_within_a_route_are_zipf_too() -> None:
    lines = list(synthetic_log("django", 600, 50, seed=2))
    authors = Counter(r.target for r in records(lines) if r.target.startswith("/authors/"))
    counts = [n for _, n in authors.most_common()]
    total = sum(counts)
    assert counts[0] / total > 0.1  # 20 times a uniform share over 200 authors
    assert counts[0] / counts[1] == pytest.approx(2 ** 1.1, rel=0.25)
    assert len(authors) > 100  # the tail is there


def test_bursts_stand_out() -> None:
    bursty = summary_of("django", 600, 20, seed=4, daily="off")
    steady = summary_of("django", 600, 20, seed=4, daily="off", bursts=False)
    assert bursty.peak_second is not None and steady.peak_second is not None
    assert bursty.peak_second.requests > 3.5 * bursty.mean_rate
    assert steady.peak_second.requests < 2.5 * steady.mean_rate
    assert steady.mean_rate == pytest.approx(20, rel=0.03)


def test_the_day_is_compressed_into_the_duration() -> None:
    summary = summary_of("fastapi", 1200, 20, seed=5, bursts=False)
    rates = [rate for _, rate in summary.series]

    def around(hour: float) -> float:
        middle = int(len(rates) * hour / 24)
        part = rates[middle - 50: middle + 50]
        return sum(part) / len(part)

    assert around(16) > 3 * around(4)  # afternoon against the small hours


def test_the_clock_curve_follows_the_start() -> None:
    start = datetime(2024, 5, 6, 0, 0, tzinfo=UTC)  # midnight to noon, by the clock
    summary = summary_of("django", 12 * 3600, 0.5, seed=6, bursts=False, daily="clock",
                         start=start)
    assert summary.series_step_s == 60
    rates = [rate for _, rate in summary.series]
    small_hours, morning = sum(rates[180:300]), sum(rates[600:720])  # 3-5 h, 10-12 h
    assert morning > 2.5 * small_hours
    assert summary.mean_rate == pytest.approx(0.5, rel=0.05)


def test_the_same_seed_gives_the_same_log() -> None:
    one = list(synthetic_log("django", 120, 20, seed=7))
    assert one == list(synthetic_log("django", 120, 20, seed=7))
    assert one != list(synthetic_log("django", 120, 20, seed=8))


def test_lines_are_combined_in_time_order_with_the_start_offset() -> None:
    start = datetime(2024, 12, 31, 23, 59, 30, tzinfo=timezone(timedelta(hours=2)))
    lines = list(synthetic_log("fastapi", 60, 20, seed=9, start=start))
    assert all(" +0200] " in line for line in lines)
    assert lines[0].split("[")[1].startswith("31/Dec/2024:23:59:3")
    assert any("[01/Jan/2025:00:00:" in line for line in lines)
    assert all(COMBINED.fullmatch(line) for line in lines)
    found = records(lines)
    times = [r.time for r in found]
    assert times == sorted(times)
    assert times[0] >= start.timestamp() and times[-1] < start.timestamp() + 60
    big = [line for line in lines if "big_json_response" in line]
    assert big and all('" 200 1059000 "' in line for line in big)
    assert {r.method for r in found} == {"GET", "POST"}


def test_a_naive_start_is_utc() -> None:
    line = next(synthetic_log("sleepy", 10, 10, start=datetime(2024, 1, 2, 3, 4, 5)))
    assert "[02/Jan/2024:03:04:" in line and " +0000] " in line


def test_written_to_a_file(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    written = write_synthetic_log(path, "sleepy", 30, 10, seed=1)
    lines = path.read_text().splitlines()
    assert written == len(lines) > 200
    assert lines == list(synthetic_log("sleepy", 30, 10, seed=1))


@pytest.mark.parametrize(
    ("args", "said"),
    [(("nope", 10, 1), "no synthetic log for the app 'nope'"),
     (("django", 0, 1), "--duration must be positive"),
     (("django", 10, -1), "--rate must be positive"),
     (("django", 10, float("nan")), "--rate must be positive"),
     (("django", 10 ** 6, 10 ** 6), "more than the 100,000,000")],
)
def test_what_it_cannot_make(args: tuple, said: str, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=re.escape(said)):
        next(synthetic_log(*args))
    with pytest.raises(SpecError, match=re.escape(said)):
        write_synthetic_log(tmp_path / "x.log", *args)
    assert not (tmp_path / "x.log").exists()
    with pytest.raises(SpecError, match="daily curve"):
        next(synthetic_log("django", 10, 1, daily="weekly"))
