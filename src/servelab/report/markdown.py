"""The markdown report: ready to paste into a README, an issue or a blog post.

At a glance (one line per variant, with its verdict), the charts, the
seed-style tables (report/tables.py) with each variant's verdicts, failures
and their causes (report/failures.py), warnings with their hints, and the
machine. Deterministic:
the same result always gives the same text.
"""

from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

from servelab.report.answer import answer_markdown, build_answer
from servelab.report.base import (
    CHARTS_DIR,
    HTML_FILE,
    MARKDOWN_FILE,
    RUNS_CSV_FILE,
    RUNS_JSON_FILE,
    ReportInput,
    describe_workload,
    environment_rows,
    experiment_line,
    summary_rows,
)
from servelab.report.failures import failures_markdown
from servelab.report.tables import seed_tables, table_markdown, verdict_lines


def _table(header: list[str], rows: list[list[str]]) -> str:
    return tabulate(rows, headers=header, tablefmt="github", disable_numparse=True)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(report: ReportInput, *, chart_titles: dict[str, str] | None = None) -> str:
    """The report as markdown; ``chart_titles`` (file stem -> title) adds image links."""
    experiment = report.experiment
    lines = [f"# {experiment.name}", "", experiment_line(report), ""]
    lines += answer_markdown(build_answer(report.analysis))

    lines += ["## At a glance", ""]
    for workload in experiment.workloads:
        rows = summary_rows(report, workload.name)
        if not rows:
            continue
        lines += [f"### {workload.name}", "", describe_workload(report, workload.name), ""]
        lines.append(
            _table(
                ["Variant", "Requests/s", "p99 [ms]", "Errors", "Verdict on requests/s"],
                [
                    [
                        _cell(f"**{r.variant}**" + (" (baseline)" if r.is_baseline else "")),
                        r.rps,
                        r.p99_ms,
                        r.errors,
                        r.verdict,
                    ]
                    for r in rows
                ],
            )
        )
        lines.append("")
    tests = sorted(
        {c.test for v in report.analysis.variants for c in v.comparisons.values()}
    ) or ["Welch's t-test"]
    lines += [
        f"Verdicts come from the {' / '.join(tests)} on requests/s against the baseline "
        "(95 %); \"no significant difference\" means the runs cannot tell the two apart, "
        "whatever the averages say.",
        "",
    ]

    if chart_titles:
        lines += ["## Charts", ""]
        for name, title in chart_titles.items():
            lines += [f"![{title}]({CHARTS_DIR}/{name}.svg)", ""]

    lines += ["## Seed-style tables", ""]
    current = None
    for table in seed_tables(experiment, report.runs):
        if table.workload != current:
            current = table.workload
            lines += [f"### {current}", ""]
        suffix = " (baseline)" if table.is_baseline else ""
        lines += [
            f"#### {table.variant}{suffix}",
            "",
            table.description,
            "",
            table_markdown(table),
            "",
        ]
        # Spread over the runs, then the verdicts against the baseline.
        verdicts = verdict_lines(report.analysis, table.workload, table.variant)
        if verdicts:
            lines += [f"- {line}" for line in verdicts] + [""]

    # Status counts beside their logged causes, and a ramp's steps (report/failures.py).
    lines += failures_markdown(experiment, report.runs)
    lines += _warnings(report)

    lines += ["## Environment", ""]
    lines.append(_table(["", ""], [[_cell(k), _cell(v)] for k, v in environment_rows(report)]))
    lines += [
        "",
        f"Every run's raw numbers: [{RUNS_JSON_FILE}]({RUNS_JSON_FILE}), "
        f"[{RUNS_CSV_FILE}]({RUNS_CSV_FILE}); the same report as one self-contained page: "
        f"[{HTML_FILE}]({HTML_FILE}).",
        "",
    ]
    return "\n".join(lines)


def _warnings(report: ReportInput) -> list[str]:
    warnings = report.analysis.all_warnings
    if not warnings:
        return ["## Warnings", "", "None.", ""]
    lines = ["## Warnings", ""]
    for warning in warnings:
        where = " / ".join(x for x in (warning.variant, warning.workload) if x)
        where = f" ({where})" if where else ""
        lines.append(f"- **{warning.kind}**{where}: {warning.message}. Hint: {warning.hint}.")
    return [*lines, ""]


class MarkdownRenderer:
    name = "markdown"

    def write(self, report: ReportInput, out_dir: Path) -> list[Path]:
        from servelab.report.charts import plan_charts

        titles = {planned.name: planned.title for planned in plan_charts(report)}
        path = out_dir / MARKDOWN_FILE
        path.write_text(render_markdown(report, chart_titles=titles))
        return [path]
