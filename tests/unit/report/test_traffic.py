"""servelab traffic's words, files and chart, from a summary of hand-built records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from servelab.report.traffic import (
    as_json,
    how_long,
    markdown,
    rate_chart,
    rate_line,
    route_rows,
    summary_rows,
    terminal,
    when,
    write_files,
)
from servelab.traffic.describe import TrafficSummary, describe
from servelab.traffic.reading import ReadCounts, UnreadableLine
from servelab.traffic.records import LogRecord

T0 = 1_714_953_600.0  # 2024-05-06 00:00:00 UTC
READING = ReadCounts(files=1, lines=1_003, read=1_000, unreadable=3, reordered=2,
                     too_late=0, first_unreadable=UnreadableLine("access.log", 7, "garbage"))


def summary() -> TrafficSummary:
    records = [LogRecord(T0 + i * 0.1, "GET", f"/items/{i % 7}?page=2", 200) for i in range(600)]
    records += [LogRecord(T0 + 30 + i * 0.01, "POST", "/orders/", 201) for i in range(300)]
    records += [LogRecord(T0 + 40 + i, "GET", f"/page{i}", 404) for i in range(100)]
    return describe(sorted(records, key=lambda r: r.time))


def test_times_and_durations_in_words() -> None:
    assert when(T0 + 3 * 3600 + 65) == "2024-05-06 03:01:05 UTC"
    assert [how_long(s) for s in (0, 45, 60, 605, 3600, 7500, 86400 * 3 + 4 * 3600)] == [
        "0 s", "45 s", "1 min", "10 min 5 s", "1 h 00 min", "2 h 05 min", "3 d 4 h"]


def test_the_facts() -> None:
    rows = dict(summary_rows(summary(), READING))
    assert rows["files"] == "1"
    assert rows["lines"] == ("1,003: 1,000 read, 3 unreadable, 2 reordered, 0 too late to "
                             "reorder")
    assert rows["first unreadable"] == "access.log line 7: 'garbage'"
    assert rows["time"] == "2024-05-06 00:00:00 UTC to 2024-05-06 00:02:19 UTC (2 min 20 s)"
    assert rows["requests"] == "1,000"
    assert rows["mean rate"] == "7.14 req/s, 428.6 req/min"
    assert rows["peak second"].startswith("110 req/s at 2024-05-06 00:00:30 UTC (15.4× the mean")
    assert rows["peak minute"] == "920 req/min at 2024-05-06 00:00 UTC (2.1× the mean)"
    assert rows["methods"] == "GET 700 (70.0 %), POST 300 (30.0 %)"
    assert rows["status codes"] == "200 600 (60.0 %), 201 300 (30.0 %), 404 100 (10.0 %)"
    assert rows["rate over time"].endswith("  0 to 110 req/s, counted per second")


def test_without_requests_or_reading() -> None:
    assert summary_rows(describe([]), None) == [("requests", "0")]
    assert rate_line(describe([])) == "-"


def test_the_top_routes_and_the_rest() -> None:
    rows, rest = route_rows(summary(), 2)
    assert rows == [("/items/{id}", "600", "60.0 %", "7", "GET 600"),
                    ("/orders/", "300", "30.0 %", "1", "POST 300")]
    assert rest == "and 100 more routes: 100 requests (10.0 %); --top shows more"
    assert route_rows(summary(), 1000)[1] == ""


def test_the_terminal_says_it_all() -> None:
    console = Console(width=160, record=True)
    console.print(terminal(summary(), READING, 2))
    text = console.export_text()
    for said in ("peak second", "/items/{id}", "and 100 more routes", "▁", "3 unreadable"):
        assert said in text


def test_markdown_and_json() -> None:
    text = markdown(summary(), READING, 3, "Traffic: access.log")
    assert text.startswith("# Traffic: access.log\n")
    assert "- **requests**: 1,000" in text
    assert "| /items/{id} " in text and "And 99 more routes" in text
    data = json.loads(as_json(summary(), READING))
    assert data["requests"] == 1000 and data["reading"]["unreadable"] == 3
    assert data["reading"]["first_unreadable"]["line"] == 7
    assert data["routes"][0]["route"] == "/items/{id}"


def test_the_chart() -> None:
    pytest.importorskip("matplotlib")
    chart = rate_chart(summary())
    assert chart.name == "traffic" and chart.svg.startswith("<?xml")
    assert chart.png.startswith(b"\x89PNG")
    assert "110 requests" in chart.description
    assert rate_chart(summary()).svg == chart.svg  # the same summary, the same SVG


def test_the_files(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    written = write_files(tmp_path / "out", summary(), READING, 5, "Traffic: x")
    names = [p.name for p in written]
    assert names == ["traffic.json", "traffic.md", "traffic.svg", "traffic.png", "traffic.html"]
    page = (tmp_path / "out" / "traffic.html").read_text()
    assert "<svg" in page and "/items/{id}" in page and "<script" not in page
