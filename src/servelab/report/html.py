"""The HTML report: one self-contained page (inline CSS, inline SVG charts).

Nothing is fetched: no script, stylesheet, font or image from anywhere, so
the file can be mailed, attached to a CI run, or opened offline years later.
Rendered from ``templates/report.html.j2`` with autoescaping on; the only
markup inserted unescaped is matplotlib's SVG output.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2
from markupsafe import Markup

from servelab.report.answer import answer_intro, build_answer
from servelab.report.base import (
    HTML_FILE,
    RUNS_CSV_FILE,
    RUNS_JSON_FILE,
    ReportInput,
    describe_workload,
    environment_rows,
    experiment_line,
    summary_rows,
)
from servelab.report.failures import (
    cause_lines,
    failure_rows,
    placement_notes,
    ramp_rows,
    ramp_summary_lines,
)
from servelab.report.tables import seed_tables, verdict_lines


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("servelab.report", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_html(report: ReportInput) -> str:
    experiment = report.experiment
    workloads = [
        {
            "name": w.name,
            "description": describe_workload(report, w.name),
            "rows": summary_rows(report, w.name),
        }
        for w in experiment.workloads
        if report.analysis.for_workload(w.name)
    ]
    tables = [
        {"table": t, "verdicts": verdict_lines(report.analysis, t.workload, t.variant)}
        for t in seed_tables(experiment, report.runs)
    ]
    # Status counts beside their logged causes, and a ramp's steps: the same rows
    # as the terminal and the markdown report (report/failures.py).
    ramp = ramp_rows(experiment, report.runs)
    failure_tables = [rows for rows in (ramp, failure_rows(experiment, report.runs)) if rows]
    charts = [
        {
            "name": chart.name,
            "title": chart.title,
            "description": chart.description,
            "svg": Markup(chart.inline_svg),  # matplotlib's own SVG output
        }
        for chart in report.charts
    ]
    answer = build_answer(report.analysis)
    tests = sorted({c.test for v in report.analysis.variants for c in v.comparisons.values()})
    return _environment().get_template("report.html.j2").render(
        answer=answer,
        answer_intro=answer_intro(answer),
        answer_tests=" / ".join(tests) or "Welch's t-test",
        experiment=experiment,
        summary_line=experiment_line(report),
        workloads=workloads,
        charts=charts,
        tables=tables,
        failure_tables=failure_tables,
        ramp_lines=ramp_summary_lines(experiment, report.runs),
        cause_lines=cause_lines(report.runs),
        placement_notes=placement_notes(report.runs),
        total_requests=sum(r.load.requests_total for r in report.runs),
        total_failed=sum(r.load.errors for r in report.runs),
        warnings=report.analysis.all_warnings,
        environment=environment_rows(report),
        runs_json=RUNS_JSON_FILE,
        runs_csv=RUNS_CSV_FILE,
    )


class HtmlRenderer:
    name = "html"

    def write(self, report: ReportInput, out_dir: Path) -> list[Path]:
        path = out_dir / HTML_FILE
        path.write_text(render_html(report))
        return [path]
