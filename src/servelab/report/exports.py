"""Result files a measuring command keeps up to date (``--export-json``,
``--export-markdown``, ``--export-csv``, as hyperfine names them): each is rewritten after
every run, so an interrupted experiment leaves them describing every run measured.

JSON holds every run as stored, every comparison with the baseline (what ``results
show --json`` prints), for a replay each route's p99 verdict, and, for load sent from
other machines, the load by machine;
markdown is the report (the same sections as the terminal's); CSV is one row per run (and
per slice), as ``servelab report`` writes ``runs.csv``. Which formats have such a file:
``report/formats.py``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from servelab.report.base import ReportInput
from servelab.report.formats import output_format
from servelab.results.outdir import check_writable_path


def json_text(report: ReportInput) -> str:
    from servelab.analysis.analyze import comparisons_document
    from servelab.analysis.routes import route_verdicts, route_verdicts_document
    from servelab.report.data import runs_json
    from servelab.report.machines import machines_document

    document = {
        **json.loads(runs_json(report)),
        "comparisons": comparisons_document(report.analysis)["comparisons"],
    }
    verdicts = route_verdicts(report.runs, report.experiment.baseline.name)
    if verdicts:  # a replay: each route's p99 against the baseline's
        document["route_verdicts"] = route_verdicts_document(verdicts)
    load_machines = machines_document(report.runs)
    if load_machines:  # load sent from other machines: how much each sent
        document["load_machines"] = load_machines
    return json.dumps(document, indent=2)


def markdown_text(report: ReportInput) -> str:
    from servelab.report.markdown import render_markdown
    from servelab.report.sections import report_sections

    return render_markdown(report_sections(report, with_files=False))


def csv_text(report: ReportInput) -> str:
    from servelab.report.data import runs_csv

    return runs_csv(report)


def check_writable(files: Mapping[str, Path]) -> None:
    """SpecError (one line) for a result file that could not be written, before anything
    is measured."""
    for fmt, path in files.items():
        check_writable_path(path, f"--export-{fmt}")


def write_result_files(files: Mapping[str, Path], report: ReportInput) -> None:
    """(Re)write each file, atomically (a reader never sees half a file)."""
    for fmt, path in files.items():
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(output_format(fmt).export_renderer()(report))
        os.replace(tmp, path)
