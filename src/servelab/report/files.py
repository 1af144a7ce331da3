"""A whole report directory: every format, written all or nothing.

``write_report`` builds the report's sections once (report/sections.py) and hands them
to every format's file writer (report/formats.py) in a staging directory beside the
target (``servelab.results.outdir``); the files are moved into place only when all of
them were written, and a non-empty target is refused unless ``force`` is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from servelab.report.base import (
    CHARTS_DIR,
    HTML_FILE,
    MARKDOWN_FILE,
    RUNS_CSV_FILE,
    RUNS_JSON_FILE,
    SCREENSHOT_FILE,
    FileWriter,
    Renderer,
    ReportInput,
    Section,
)
from servelab.report.data import runs_csv, runs_json
from servelab.report.formats import OUTPUT_FORMATS
from servelab.report.html import render_html
from servelab.report.markdown import render_markdown
from servelab.report.sections import ChartsSection, report_sections
from servelab.report.why import write_profile_files
from servelab.results.outdir import staged_output


def text_file(name: str, render: Renderer[str]) -> FileWriter:
    """A writer of the file ``name``, holding the sections as ``render`` lays them out."""

    def write(report: ReportInput, sections: Sequence[Section], out_dir: Path) -> list[Path]:
        path = out_dir / name
        path.write_text(render(sections))
        return [path]

    return write


def write_charts(report: ReportInput, sections: Sequence[Section], out_dir: Path) -> list[Path]:
    """Every chart of the charts section as a standalone SVG and PNG in ``charts/``."""
    charts_dir = out_dir / CHARTS_DIR
    charts_dir.mkdir(exist_ok=True)
    written = []
    for section in sections:
        if not isinstance(section, ChartsSection):
            continue
        for chart in section.charts:
            svg, png = charts_dir / f"{chart.name}.svg", charts_dir / f"{chart.name}.png"
            svg.write_text(chart.svg)
            png.write_bytes(chart.png)
            written += [svg, png]
    return written


def write_runs_json(report: ReportInput, sections: Sequence[Section], out_dir: Path) -> list[Path]:
    """Every raw run as JSON (report/data.py)."""
    path = out_dir / RUNS_JSON_FILE
    path.write_text(runs_json(report))
    return [path]


def write_runs_csv(report: ReportInput, sections: Sequence[Section], out_dir: Path) -> list[Path]:
    """Every raw run (and slice) as CSV, one row each (report/data.py)."""
    path = out_dir / RUNS_CSV_FILE
    path.write_text(runs_csv(report))
    return [path]


def write_profiles(report: ReportInput, sections: Sequence[Section], out_dir: Path) -> list[Path]:
    """The profiled runs' stacks per variant, folded and as speedscope JSON (report/why.py)."""
    return write_profile_files(report, out_dir)


write_markdown = text_file(MARKDOWN_FILE, render_markdown)
write_html = text_file(HTML_FILE, render_html)


def write_report(
    report: ReportInput,
    out_dir: Path,
    *,
    force: bool = False,
    screenshot: bool = False,
    writers: Sequence[FileWriter] | None = None,
) -> list[Path]:
    """Write every format of ``report`` into ``out_dir`` (``writers``: every one of
    report/formats.py); the paths written, in order."""
    if writers is None:
        writers = [output.file_writer() for output in OUTPUT_FORMATS]
    sections = report_sections(report)
    with staged_output(out_dir, force=force) as staging:
        written: list[Path] = []
        for write in writers:
            written += write(report, sections, staging)
        if screenshot:
            from servelab.report.browser import screenshot as take_screenshot

            written.append(take_screenshot(staging / HTML_FILE, staging / SCREENSHOT_FILE))
        relative = [path.resolve().relative_to(staging.resolve()) for path in written]
    return [out_dir / path for path in relative]


def report_result(
    ref: str,
    *,
    results_root: Path,
    out_dir: Path | None = None,
    force: bool = False,
    screenshot: bool = False,
) -> list[Path]:
    """``servelab report``: every format of RESULT, into ``out_dir`` (default RESULT/report)."""
    from servelab.report.base import load_result

    report, result_dir, _ = load_result(ref, results_root)
    return write_report(
        report, out_dir or result_dir / "report", force=force, screenshot=screenshot
    )
