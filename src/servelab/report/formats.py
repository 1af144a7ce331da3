"""Every output format servelab writes, one entry each: the files it adds to a report
directory (``servelab report``; written all or nothing by ``report/files.py``) and, where
it has one, the ``--export-NAME`` file a measuring command rewrites after every run
(``report/exports.py``). Adding a format is its functions and one entry here.

As in the plug-ins' registries (``servelab/registry.py``), the functions are named
"module:function" and imported when first used: the CLI takes its ``--export-*`` options
from here without importing a renderer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from servelab.errors import SpecError
from servelab.registry import imported

if TYPE_CHECKING:
    from servelab.report.base import ExportRenderer, FileWriter


@dataclass(frozen=True)
class OutputFormat:
    name: str
    # "module:function", a FileWriter: this format's files in a report directory.
    report_files: str
    # "module:function", an ExportRenderer: the text of --export-NAME; None: no such option.
    export: str | None = None

    def file_writer(self) -> FileWriter:
        return cast("FileWriter", imported(self.report_files))

    def export_renderer(self) -> ExportRenderer:
        if self.export is None:
            raise SpecError(f"there is no --export-{self.name}", f"choose one of {_choices()}")
        return cast("ExportRenderer", imported(self.export))


# In the order the report directory's files are written and --help lists --export-*.
OUTPUT_FORMATS: tuple[OutputFormat, ...] = (
    OutputFormat(
        "json", "servelab.report.files:write_runs_json", "servelab.report.exports:json_text"
    ),
    OutputFormat(
        "markdown", "servelab.report.files:write_markdown",
        "servelab.report.exports:markdown_text",
    ),
    OutputFormat(
        "csv", "servelab.report.files:write_runs_csv", "servelab.report.exports:csv_text"
    ),
    OutputFormat("html", "servelab.report.files:write_html"),
    OutputFormat("charts", "servelab.report.files:write_charts"),  # charts/*.svg and .png
    # The profiled runs' stacks per variant: folded and speedscope JSON.
    OutputFormat("profiles", "servelab.report.files:write_profiles"),
)
# The formats a measuring command can keep up to date (--export-FORMAT).
EXPORT_FORMATS: tuple[str, ...] = tuple(f.name for f in OUTPUT_FORMATS if f.export)


def _choices() -> str:
    return ", ".join(f"--export-{name}" for name in EXPORT_FORMATS)


def output_format(name: str) -> OutputFormat:
    """The format called ``name``; SpecError naming the choices for another."""
    for found in OUTPUT_FORMATS:
        if found.name == name:
            return found
    raise SpecError(
        f"unknown output format {name!r}",
        f"choose one of {', '.join(f.name for f in OUTPUT_FORMATS)}",
    )
