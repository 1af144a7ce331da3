"""Writing a report directory: every format, never half a report, never over the user's files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from servelab.errors import ServelabError
from servelab.report.base import ReportInput, Section
from servelab.report.files import write_charts, write_report
from servelab.report.formats import EXPORT_FORMATS, OUTPUT_FORMATS, output_format


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


def test_every_output_format_resolves_and_names_its_export(tmp_path: Path) -> None:
    """One registry: each format's functions import, the --export-* options are the
    formats with an export, and asking for one that has none names the choices."""
    for output in OUTPUT_FORMATS:
        assert callable(output.file_writer()), output.name
        if output.export:
            assert callable(output.export_renderer()), output.name
    assert EXPORT_FORMATS == ("json", "markdown", "csv")
    with pytest.raises(ServelabError, match="no --export-html") as caught:
        output_format("html").export_renderer()
    assert "--export-json" in caught.value.fix
    with pytest.raises(ServelabError, match="unknown output format 'pdf'"):
        output_format("pdf")
