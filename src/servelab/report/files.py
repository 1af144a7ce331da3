"""Chart files, and a whole report directory: every format, written all or nothing.

``write_report`` renders every format into a staging directory beside the
target (``servelab.results.outdir``); the files are moved into place only when all of
them were written, and a non-empty target is refused unless ``force`` is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from servelab.report.base import CHARTS_DIR, HTML_FILE, SCREENSHOT_FILE, Renderer, ReportInput
from servelab.report.data import DataRenderer
from servelab.report.html import HtmlRenderer
from servelab.report.markdown import MarkdownRenderer
from servelab.results.outdir import staged_output


class ChartRenderer:
    """Every chart as a standalone SVG and PNG in ``charts/``."""

    name = "charts"

    def write(self, report: ReportInput, out_dir: Path) -> list[Path]:
        charts_dir = out_dir / CHARTS_DIR
        charts_dir.mkdir(exist_ok=True)
        written = []
        for chart in report.charts:
            svg, png = charts_dir / f"{chart.name}.svg", charts_dir / f"{chart.name}.png"
            svg.write_text(chart.svg)
            png.write_bytes(chart.png)
            written += [svg, png]
        return written


RENDERERS: tuple[Renderer, ...] = (
    MarkdownRenderer(),
    HtmlRenderer(),
    ChartRenderer(),
    DataRenderer(),
)


def write_report(
    report: ReportInput,
    out_dir: Path,
    *,
    force: bool = False,
    screenshot: bool = False,
    renderers: Sequence[Renderer] = RENDERERS,
) -> list[Path]:
    """Write every format of ``report`` into ``out_dir``; the paths written, in order."""
    with staged_output(out_dir, force=force) as staging:
        written: list[Path] = []
        for renderer in renderers:
            written += renderer.write(report, staging)
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
