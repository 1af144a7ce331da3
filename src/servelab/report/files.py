"""Chart files, and writing a whole report directory without ever overwriting silently.

``write_report`` renders every format into a fresh temporary directory beside
the target first; only when all of them succeeded are the files moved into
place. So a failure leaves the target as it was, and an existing, non-empty
target is refused unless ``force`` is given (then only the report's own files
are replaced; nothing else in the directory is touched).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from servelab.errors import ServelabError
from servelab.report.base import CHARTS_DIR, HTML_FILE, SCREENSHOT_FILE, Renderer, ReportInput
from servelab.report.data import DataRenderer
from servelab.report.html import HtmlRenderer
from servelab.report.markdown import MarkdownRenderer


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


def check_out_dir(out_dir: Path, *, force: bool, option: str = "--out") -> None:
    """Refuse a target that is a file, or a directory with something in it (unless ``force``)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ServelabError(
            f"{out_dir} exists and is not a directory", f"choose another {option} directory"
        )
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force:
        raise ServelabError(
            f"output directory {out_dir} exists and is not empty",
            f"choose a new {option} directory, or pass --force to replace the files "
            "servelab writes there",
        )


def move_into(staging: Path, out_dir: Path) -> None:
    """Move every file of ``staging`` to the same place under ``out_dir``; remove staging."""
    for source in sorted(staging.rglob("*")):
        if source.is_dir():
            continue
        target = out_dir / source.relative_to(staging)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
    shutil.rmtree(staging, ignore_errors=True)


def write_report(
    report: ReportInput,
    out_dir: Path,
    *,
    force: bool = False,
    screenshot: bool = False,
    renderers: Sequence[Renderer] = RENDERERS,
) -> list[Path]:
    """Write every format of ``report`` into ``out_dir``; the paths written, in order."""
    check_out_dir(out_dir, force=force)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    try:
        written: list[Path] = []
        for renderer in renderers:
            written += renderer.write(report, staging)
        if screenshot:
            from servelab.report.browser import screenshot as take_screenshot

            written.append(take_screenshot(staging / HTML_FILE, staging / SCREENSHOT_FILE))
        relative = [path.resolve().relative_to(staging.resolve()) for path in written]
        out_dir.mkdir(exist_ok=True)
        move_into(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [out_dir / path for path in relative]
