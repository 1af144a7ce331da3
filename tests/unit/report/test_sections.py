"""Report sections: every renderer renders every kind; the live report is the same sections."""

from __future__ import annotations

import io

from rich.console import Console

from servelab.report.base import ReportInput, Section, Table, failure_breakdown, log_events
from servelab.report.data import runs_csv
from servelab.report.flames import flame_svg
from servelab.report.html import render_html
from servelab.report.markdown import render_markdown
from servelab.report.sections import (
    SECTION_KINDS,
    ChartsSection,
    FilesSection,
    LoadMachinesSection,
    MemorySection,
    RampSection,
    ReplaySection,
    RequestNamesSection,
    RouteVerdictsSection,
    TimingSection,
    WhySection,
    live_sections,
    report_sections,
)
from servelab.report.terminal import render_terminal
from servelab.report.why import FlameGraph
from servelab.results.records import RunRecord

from .common import load, sections


def every_kind_of_section() -> list[Section]:
    """A fixture's sections, plus the kinds its experiment has none of (a ramp's steps,
    memory per worker, ab's time per request, requests by name, load by machine)."""
    table = Table(("Variant", "Server", "Figure"), (("tcp", "gunicorn", "1.0"),), 2)
    extra = [
        RampSection(table, ("tcp run 1: fine",)), MemorySection(table), TimingSection(table),
        RequestNamesSection(table, ("scenario: built-in",)), LoadMachinesSection(table),
        ReplaySection(table), RouteVerdictsSection(table),
        WhySection(
            ("spin vs base (w): +50.0 µs/request", "  +49.0 µs/request in spin (app.py)"),
            ("py-spy wrote no profile of app (pid 1): error",),
            (FlameGraph("diff-spin-w", "spin vs base / w", flame_svg(
                {("app", "spin (app.py:2)"): 50.0}, {("app", "run (app.py:1)"): 5.0},
                title="spin vs base",
            )),),
        ),
    ]
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


def test_the_live_report_is_the_same_sections_without_charts_or_files() -> None:
    report = load("rate-steps")
    live = live_sections(report.experiment, report.environment, report.runs)
    written = [type(s) for s in sections("rate-steps")]
    assert [type(s) for s in live] == [k for k in written if k not in (ChartsSection, FilesSection)]
    assert live == report_sections(report, with_files=False)
