"""Sections, HTML and charts: structure, not bytes. And writing a report directory safely."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

import pytest
from matplotlib.image import imread
from rich.console import Console

from servelab.errors import ServelabError
from servelab.report.base import ReportInput, Section, Table, failure_breakdown, log_events
from servelab.report.charts import (
    Chart,
    RampPoint,
    build_charts,
    grid_knobs,
    plan_charts,
    ramp_chart,
    ramp_points,
)
from servelab.report.data import runs_csv
from servelab.report.files import write_charts, write_report
from servelab.report.html import render_html
from servelab.report.markdown import render_markdown
from servelab.report.sections import (
    SECTION_KINDS,
    ChartsSection,
    FilesSection,
    MemorySection,
    RampSection,
    TimingSection,
    live_sections,
    report_sections,
)
from servelab.report.terminal import render_terminal
from servelab.results.records import RunRecord
from servelab.results.store import ResultStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "results"
SVG_NS = "{http://www.w3.org/2000/svg}"


@cache
def load(name: str) -> ReportInput:
    """The fixture, analysed; cached."""
    return ReportInput.from_store(ResultStore.open(FIXTURES / name))


@cache
def sections(name: str) -> tuple[Section, ...]:
    """The fixture's report sections; cached, so its charts are drawn once for all tests."""
    return tuple(report_sections(load(name)))


def charts(name: str) -> tuple[Chart, ...]:
    return next(s.charts for s in sections(name) if isinstance(s, ChartsSection))


@pytest.fixture
def grid() -> ReportInput:
    return load("workers-threads")


@pytest.fixture
def ramp() -> ReportInput:
    return load("rate-steps")


class _Elements(HTMLParser):
    """Tags, ids and outward references of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: list[str] = []
        self.references: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for key, value in attrs:
            if key == "id" and value:
                self.ids.append(value)
            if key in ("src", "href", "xlink:href", "action", "poster") and value:
                self.references.append(value)


def _parse(html: str) -> _Elements:
    parser = _Elements()
    parser.feed(html)
    return parser


# --------------------------------------------------------------------------- sections


def every_kind_of_section() -> list[Section]:
    """A fixture's sections, plus the kinds its experiment has none of (a ramp's steps,
    memory per worker, ab's time per request)."""
    table = Table(("Variant", "Server", "Figure"), (("tcp", "gunicorn", "1.0"),), 2)
    extra = [RampSection(table, ("tcp run 1: fine",)), MemorySection(table), TimingSection(table)]
    return [*sections("rate-steps"), *extra]


def test_every_format_renders_every_kind_of_section() -> None:
    parts = every_kind_of_section()
    assert {type(s) for s in parts} == set(SECTION_KINDS)
    markdown = render_markdown(parts)
    html = render_html(parts)
    terminal = io.StringIO()
    Console(file=terminal, width=240).print(render_terminal(parts))
    for section in parts:
        if section.heading:
            assert f"## {section.heading}" in markdown
            assert f"<h2>{section.heading}</h2>" in html
            assert section.heading in terminal.getvalue()
        assert f'id="{section.kind}"' in html or section.kind in ("title", "files")
    # The kinds without a heading: the title, and the closing line naming the files.
    assert markdown.startswith("# rate-steps\n") and "<h1>rate-steps</h1>" in html
    assert "runs.json" in markdown and "runs.json" in html and "runs.json" in terminal.getvalue()


def test_the_terminal_ends_with_the_answer() -> None:
    terminal = io.StringIO()
    Console(file=terminal, width=240).print(render_terminal(sections("rate-steps")))
    text = terminal.getvalue()
    assert text.index("Environment") < text.index("Answer")
    assert "winner tcp" in text.split("Answer")[-1]


def test_the_live_report_is_the_same_sections_without_charts_or_files() -> None:
    report = load("rate-steps")
    live = live_sections(report.experiment, report.environment, report.runs)
    written = [type(s) for s in sections("rate-steps")]
    assert [type(s) for s in live] == [k for k in written if k not in (ChartsSection, FilesSection)]
    assert live == report_sections(report, with_files=False)


# --------------------------------------------------------------------------- charts


def test_charts_fit_the_result(grid: ReportInput, ramp: ReportInput) -> None:
    assert [c.name for c in plan_charts(load("quick"))] == ["rps", "latency", "errors"]
    assert [c.name for c in plan_charts(grid)] == ["rps", "latency", "heatmap", "errors"]
    assert [c.name for c in plan_charts(ramp)] == ["rps", "latency", "ramp", "errors"]


def test_grid_knobs_are_detected_from_the_variant_specs(grid: ReportInput) -> None:
    assert grid_knobs(grid.experiment.stacks) == ("server.workers", "server.threads")
    # quick varies transport and keepalive: not two numeric knobs, no heatmap.
    assert grid_knobs(load("quick").experiment.stacks) is None
    # sleepy-workers varies workers, threads, worker class and transport together.
    assert grid_knobs(load("sleepy-workers").experiment.stacks) is None


@pytest.mark.parametrize("name", ["quick", "workers-threads", "rate-steps", "sleepy-workers"])
def test_every_chart_is_valid_svg_and_png(name: str) -> None:
    report = load(name)
    for chart in charts(name):
        root = ET.fromstring(chart.svg.encode())
        assert root.tag == f"{SVG_NS}svg", chart.name
        if chart.name == "errors" and not failure_breakdown(report.runs):
            assert "No failed requests" in chart.svg
        else:  # drawn data, not an empty canvas: matplotlib draws marks as paths
            assert len(root.findall(f".//{SVG_NS}path")) > 5, chart.name
        assert chart.png.startswith(b"\x89PNG\r\n\x1a\n")
        pixels = imread(io.BytesIO(chart.png))
        assert pixels.shape[0] > 200 and pixels.shape[1] > 300
        assert pixels.std() > 0.05, f"{chart.name} looks blank"


def test_rps_chart_shows_every_variant_and_workload(grid: ReportInput) -> None:
    svg = next(c for c in charts("workers-threads") if c.name == "rps").svg
    for stack in grid.experiment.stacks:
        assert f">{stack.name}<" in svg
    assert ">sync-small<" in svg
    assert "95 % CI" in svg and ">baseline<" in svg


def test_heatmap_cells_hold_the_mean_requests_per_second(grid: ReportInput) -> None:
    svg = next(c for c in charts("workers-threads") if c.name == "heatmap").svg
    for variant in grid.analysis.variants:
        assert f">{variant.metrics['rps'].summary.mean:,.0f}<" in svg
    assert ">workers<" in svg and ">threads<" in svg


def test_charts_are_deterministic() -> None:
    again = ReportInput.from_store(ResultStore.open(FIXTURES / "workers-threads"))
    assert [c.svg for c in charts("workers-threads")] == [c.svg for c in build_charts(again)]


def test_ramp_points_come_from_the_open_model_workloads(ramp: ReportInput) -> None:
    points = ramp_points(ramp)
    assert set(points) == {"tcp", "unix"}
    assert [p.rate for p in points["tcp"]] == [500.0, 1500.0, 4000.0]
    tcp_4000 = points["tcp"][-1]
    assert tcp_4000.error_ratio == pytest.approx(43 / 3151)
    assert points["unix"][-1].error_ratio == 0.0
    assert ramp_points(load("quick")) == {}


def test_ramp_chart_takes_a_plain_list_of_points() -> None:
    # Shaped like the seed's backlog study (nginx_gunicorn_somaxconn.md): 1 sync worker,
    # 2 s per request; fine at low rates, then 502s once the backlog overflows.
    points = [
        (0.5, 2010.0, 0.0),
        (1.0, 4020.0, 0.0),
        (50.0, 60_100.0, 0.0),
        (200.0, 64_500.0, 0.335),
        (400.0, 65_000.0, 0.61),
    ]
    chart = ramp_chart(points, p99_limit_ms=5000, max_error_ratio=0.01)
    assert isinstance(chart, Chart) and chart.name == "ramp"
    assert "first errors at 200 req/s" in chart.svg
    assert "p99 limit 5000 ms" in chart.svg and "error limit 1 %" in chart.svg
    assert [RampPoint(*p) for p in points][3].error_ratio == 0.335
    with pytest.raises(ValueError, match="at least one point"):
        ramp_chart([])


# --------------------------------------------------------------------------- HTML


@pytest.mark.parametrize("name", ["workers-threads", "rate-steps"])
def test_html_is_self_contained_with_every_chart_inline(name: str) -> None:
    html = render_html(sections(name))
    page = _parse(html)
    assert page.tags.count("svg") == len(charts(name))
    for chart in charts(name):
        assert f'id="chart-{chart.name}"' in html
    # Nothing to fetch: no script, stylesheet link, image, frame or font from anywhere.
    for tag in ("script", "link", "img", "iframe", "object", "embed"):
        assert tag not in page.tags, tag
    assert "@import" not in html and not re.search(r"url\((?!#)", html)  # only in-page refs
    for reference in page.references:  # in-page (#id), relative files, or inline data
        if reference.startswith("data:"):
            continue
        assert not re.match(r"^[a-z]+:", reference) and not reference.startswith("//"), reference
    for target in re.findall(r'href="#([^"]+)"|url\(#([^)]+)\)', html):
        assert "".join(target) in page.ids, f"dangling in-page reference #{''.join(target)}"
    # Several SVGs in one page: their ids must not collide.
    duplicates = {i for i in page.ids if page.ids.count(i) > 1}
    assert not duplicates
    # The sections people look for.
    for section in ("glance", "charts", "errors", "warnings", "tables", "environment"):
        assert f'id="{section}"' in html


def test_html_escapes_what_it_did_not_write(grid: ReportInput) -> None:
    hostile = grid.experiment.model_copy(update={"name": "<script>alert(1)</script>"})
    report = ReportInput.build(hostile, grid.environment, grid.runs)
    html = render_html(report_sections(report, with_files=False))
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_html_shows_verdicts_warnings_failures_and_environment() -> None:
    html = render_html(sections("rate-steps"))
    assert 'class="badge no"' in html  # "no significant difference"
    assert "43 of 3,151 (1.36 %)" in html
    assert "200 x3108, timeout x43" in html  # status counts beside their causes
    assert "requests/s varies by 57.1 %" in html
    assert "stack on CPUs 0, load driver on CPUs 1" in html


# --------------------------------------------------------------------------- log events


def test_classified_log_lines_are_shown_when_runs_have_them(ramp: ReportInput) -> None:
    runs = []
    for run in ramp.runs:
        data = run.model_dump()
        if run.variant == "tcp" and run.workload == "rate-4000":
            data["log_events"] = {"read_timeout": 20, "backlog_overflow": 3}
        runs.append(RunRecord.model_validate(data))
    report = ReportInput.build(ramp.experiment, ramp.environment, runs)
    assert log_events(runs[-1]) in ({}, {"read_timeout": 20, "backlog_overflow": 3})
    report_parts = report_sections(report)
    markdown = render_markdown(report_parts)
    assert "backlog_overflow x6, read_timeout x40" in markdown  # two runs summed
    assert "- backlog_overflow x6: " in markdown  # the cause, and its fix
    (drawn,) = (s.charts for s in report_parts if isinstance(s, ChartsSection))
    errors = next(c for c in drawn if c.name == "errors")
    assert "Classified log lines" in errors.svg and "backlog_overflow" in errors.svg
    header = runs_csv(report).splitlines()[0].split(",")
    assert "log_backlog_overflow" in header and "log_read_timeout" in header
    html = render_html(report_parts)
    assert "backlog_overflow x6, read_timeout x40" in html and "backlog_overflow x6: " in html


def test_failure_breakdown_counts_codes_and_connection_errors(ramp: ReportInput) -> None:
    assert failure_breakdown(ramp.runs) == {"connection: timeout": 43}
    assert log_events(ramp.runs[0]) == {}


# --------------------------------------------------------------------------- files


def test_write_report_writes_every_format(tmp_path: Path, grid: ReportInput) -> None:
    out = tmp_path / "report"
    written = write_report(grid, out)
    names = sorted(str(p.relative_to(out)) for p in written)
    assert names == sorted(
        [
            "report.md", "report.html", "runs.json", "runs.csv",
            *(f"charts/{c}.{ext}" for c in ("rps", "latency", "heatmap", "errors")
              for ext in ("svg", "png")),
        ]
    )
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"], "no staging dir left"


def test_a_non_empty_output_directory_is_refused_then_replaced_with_force(
    tmp_path: Path, grid: ReportInput
) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.md").write_text("my notes")
    (out / "keep.txt").write_text("not servelab's")
    with pytest.raises(ServelabError, match="exists and is not empty") as caught:
        write_report(grid, out)
    assert "--overwrite" in caught.value.fix
    assert (out / "report.md").read_text() == "my notes"
    write_report(grid, out, force=True)
    assert (out / "report.md").read_text().startswith("# workers-threads")
    assert (out / "keep.txt").read_text() == "not servelab's"


def test_a_failing_writer_leaves_nothing_behind(tmp_path: Path, grid: ReportInput) -> None:
    def broken(report: ReportInput, sections: Sequence[Section], out_dir: Path) -> list[Path]:
        raise RuntimeError("renderer bug")

    out = tmp_path / "report"
    with pytest.raises(RuntimeError):
        write_report(grid, out, writers=(write_charts, broken))
    assert list(tmp_path.iterdir()) == [], "neither the target nor a staging dir remains"


def test_a_result_without_runs_is_a_clear_error(grid: ReportInput) -> None:
    with pytest.raises(ServelabError, match="has no finished run"):
        ReportInput.build(grid.experiment, grid.environment, [], source="result #9")
