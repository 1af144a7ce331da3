"""The report as markdown: ready to paste into a README, an issue or a blog post.

Renders every kind of section (report/sections.py) as GitHub-flavoured
markdown. Deterministic: the same sections always give the same text.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import singledispatch

from tabulate import tabulate

from servelab.report import sections as kinds
from servelab.report.base import (
    CHARTS_DIR,
    HTML_FILE,
    RUNS_CSV_FILE,
    RUNS_JSON_FILE,
    Section,
)
from servelab.report.tables import SeedTable


def render_markdown(sections: Sequence[Section]) -> str:
    return "\n".join(line for section in sections for line in section_lines(section))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return tabulate(
        [[_cell(c) for c in row] for row in rows],
        headers=[_cell(h) for h in header],
        tablefmt="github",
        disable_numparse=True,
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _bullets(lines: Sequence[str]) -> list[str]:
    """``lines`` as a list, followed by a blank line (nothing when there are none)."""
    return [*(f"- {line}" for line in lines), ""] if lines else []


def _heading(section: Section, *, about: str = "") -> list[str]:
    return [f"## {section.heading}", "", *([about, ""] if about else [])]


def seed_table_markdown(table: SeedTable) -> str:
    """A seed table with the seeds' bold header (the difference column stays plain)."""
    header = [h if h in ("", "Difference to baseline") else f"**{h}**" for h in table.header]
    return _table(header, table.rows)


@singledispatch
def section_lines(section: Section) -> list[str]:
    """The markdown lines of one section."""
    raise TypeError(f"no markdown for the {type(section).__name__}")


@section_lines.register
def _title(section: kinds.TitleSection) -> list[str]:
    return [f"# {section.name}", "", section.summary, ""]


@section_lines.register
def _answer(section: kinds.AnswerSection) -> list[str]:
    answer = section.answer
    lines = _heading(section)
    if not answer.workloads:
        return [*lines, section.nothing_yet, ""]
    lines += [section.intro, ""]
    for w in answer.workloads:
        headline = f"winner **{w.winner}**" if w.winner else "no single winner"
        lines.append(f"**{w.workload}**: {headline} ({w.winner_note})")
        lines += [f"- {line.text()}" for line in w.lines]
        lines.append("")
    lines += [f"Test: {', '.join(answer.tests)}.", ""]
    lines += _bullets(section.why)
    lines += _bullets(section.outlook)
    if answer.warnings:
        lines += ["Warnings:", "", *_bullets([g.text() for g in answer.warnings])]
    return lines


@section_lines.register
def _glance(section: kinds.GlanceSection) -> list[str]:
    lines = _heading(section)
    for workload in section.workloads:
        lines += [f"### {workload.name}", "", workload.description, ""]
        rows = [
            [
                f"**{r.variant}**" + (" (baseline)" if r.is_baseline else ""),
                r.rps,
                r.p99_ms,
                r.errors,
                r.verdict,
            ]
            for r in workload.rows
        ]
        header = ["Variant", "Requests/s", "p99 [ms]", "Errors", section.verdict_heading]
        lines += [_table(header, rows), ""]
    return [*lines, section.footnote, ""]


@section_lines.register
def _charts(section: kinds.ChartsSection) -> list[str]:
    lines = _heading(section)
    for chart in section.charts:
        lines += [f"![{chart.title}]({CHARTS_DIR}/{chart.name}.svg)", ""]
    if section.missing:
        lines += [section.missing, ""]
    return lines


@section_lines.register
def _seed_tables(section: kinds.SeedTablesSection) -> list[str]:
    lines = _heading(section)
    workload = None
    for item in section.tables:
        table = item.table
        if table.workload != workload:
            workload = table.workload
            lines += [f"### {workload}", ""]
        suffix = " (baseline)" if table.is_baseline else ""
        lines += [f"#### {table.variant}{suffix}", "", table.description, ""]
        lines += [seed_table_markdown(table), ""]
        lines += _bullets([*item.spread, *(v.text for v in item.verdicts)])
    return lines


@section_lines.register
def _ramp(section: kinds.RampSection) -> list[str]:
    table = section.table
    return [*_heading(section), *_bullets(section.verdicts), _table(table.header, table.rows), ""]


@section_lines.register
def _failures(section: kinds.FailuresSection) -> list[str]:
    lines = _heading(section)
    if section.all_succeeded:
        lines += [section.all_succeeded, ""]
    lines += [_table(section.table.header, section.table.rows), ""]
    return lines + _bullets([*section.causes, *(f"note: {n}" for n in section.notes)])


@section_lines.register
def _why(section: kinds.WhySection) -> list[str]:
    lines = [*_heading(section, about=section.about), "```", *section.lines, "```", ""]
    return lines + _bullets([f"note: {n}" for n in section.notes])


@section_lines.register
def _explained_table(section: kinds.ExplainedTableSection) -> list[str]:
    table = section.table
    return [*_heading(section, about=section.about), _table(table.header, table.rows), ""]


@section_lines.register
def _warnings(section: kinds.WarningsSection) -> list[str]:
    if not section.warnings:
        return [*_heading(section), "None.", ""]
    lines = []
    for warning in section.warnings:
        where = " / ".join(x for x in (warning.variant, warning.workload) if x)
        where = f" ({where})" if where else ""
        lines.append(f"**{warning.kind}**{where}: {warning.message}. Hint: {warning.hint}.")
    return [*_heading(section), *_bullets(lines)]


@section_lines.register
def _method(section: kinds.MethodSection) -> list[str]:
    return [*_heading(section), *_bullets(section.notes)]


@section_lines.register
def _environment(section: kinds.EnvironmentSection) -> list[str]:
    return [*_heading(section), _table(["", ""], section.rows), ""]


@section_lines.register
def _files(section: kinds.FilesSection) -> list[str]:
    return [
        f"Every run's raw numbers: [{RUNS_JSON_FILE}]({RUNS_JSON_FILE}), "
        f"[{RUNS_CSV_FILE}]({RUNS_CSV_FILE}); the same report as one self-contained page: "
        f"[{HTML_FILE}]({HTML_FILE}).",
        "",
    ]
