"""The report in the terminal, with rich: every kind of section (report/sections.py).

The same sections as the files, in the same order but for the answer, which
comes last: a terminal shows the end of what was printed.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import singledispatch

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.table import Table as RichTable
from rich.text import Text

from servelab.report.base import CHARTS_DIR, HTML_FILE, RUNS_CSV_FILE, RUNS_JSON_FILE, Section
from servelab.report.sections import (
    AnswerSection,
    ChartsSection,
    EnvironmentSection,
    FailuresSection,
    FilesSection,
    GlanceSection,
    MemorySection,
    MethodSection,
    RampSection,
    SeedTablesSection,
    TimingSection,
    TitleSection,
    WarningsSection,
)

VERDICT_COLOURS = {"better": "green", "worse": "red"}


def render_terminal(sections: Sequence[Section]) -> Group:
    """Every section as rich renderables, for ``console.print``."""
    answers = [s for s in sections if isinstance(s, AnswerSection)]
    ordered = [s for s in sections if not isinstance(s, AnswerSection)] + answers
    return Group(*(part for section in ordered for part in section_parts(section)))


def _rule(title: str) -> Rule:
    return Rule(Text(title, style="bold"))


def _line(text: str, style: str = "") -> Text:
    return Text(text, style=style)


def _grid(
    header: Sequence[str], rows: Sequence[Sequence[str]], labels: int, title: str | None = None
) -> RichTable:
    """A table whose first ``labels`` columns name the row (left) and hold figures after.
    Every text is plain (``Text``): "[ms]" in a header is a unit, not rich markup."""
    table = RichTable(title=Text(title) if title else None, title_justify="left")
    for index, column in enumerate(header):
        table.add_column(
            Text(column), justify="left" if index < labels else "right", no_wrap=index < labels
        )
    for row in rows:
        table.add_row(*map(Text, row))
    return table


@singledispatch
def section_parts(section: Section) -> list[RenderableType]:
    """The rich renderables of one section."""
    raise TypeError(f"no terminal output for the {type(section).__name__}")


@section_parts.register
def _title(section: TitleSection) -> list[RenderableType]:
    return [_rule(section.name), _line(section.summary, "dim")]


@section_parts.register
def _answer(section: AnswerSection) -> list[RenderableType]:
    answer = section.answer
    parts: list[RenderableType] = [_rule(section.heading), _line(section.intro, "dim")]
    if not answer.workloads:
        parts.append(_line(section.nothing_yet))
    for workload in answer.workloads:
        parts.append(
            Text.assemble(
                (workload.workload, "bold"), ": winner ", (workload.winner, "bold"),
                f" ({workload.winner_note})",
            )
        )
        for line in workload.lines:
            text = Text.assemble("  ", (line.text(), VERDICT_COLOURS.get(line.verdict, "")))
            if not line.clear:
                text.append(" (not clear)", style="yellow")
            parts.append(text)
    if answer.tests:
        parts.append(_line(f"test: {', '.join(answer.tests)}", "dim"))
    parts += [_line(text) for text in section.outlook]
    parts += [Text.assemble(("!", "yellow"), f" {group.text()}") for group in answer.warnings]
    return parts


@section_parts.register
def _glance(section: GlanceSection) -> list[RenderableType]:
    parts: list[RenderableType] = [_rule(section.heading)]
    header = ("Variant", "Requests/s", "p99 [ms]", "Errors", "Verdict on requests/s")
    for workload in section.workloads:
        rows = [
            (
                r.variant + (" (baseline)" if r.is_baseline else ""),
                r.rps,
                r.p99_ms,
                r.errors,
                r.verdict,
            )
            for r in workload.rows
        ]
        parts.append(_grid(header, rows, 1, f"{workload.name}: {workload.description}"))
    return [*parts, _line(section.footnote, "dim")]


@section_parts.register
def _charts(section: ChartsSection) -> list[RenderableType]:
    return [
        _rule(section.heading),
        *(_line(f"{c.title}: {CHARTS_DIR}/{c.name}.svg") for c in section.charts),
    ]


@section_parts.register
def _seed_tables(section: SeedTablesSection) -> list[RenderableType]:
    parts: list[RenderableType] = []
    workload = None
    for item in section.tables:
        table = item.table
        if table.workload != workload:
            workload = table.workload
            parts.append(_rule(f"{section.heading}: {workload}"))
        baseline = " (baseline)" if table.is_baseline else ""
        title = f"{table.variant}{baseline}: {table.description}"
        parts.append(_grid(table.header, table.rows, 1, title))
        parts += [_line(f"  {line}", "dim") for line in item.spread]
        parts += [
            _line(f"  {v.text}", VERDICT_COLOURS.get(v.kind, "dim")) for v in item.verdicts
        ]
    return parts


@section_parts.register
def _ramp(section: RampSection) -> list[RenderableType]:
    table = section.table
    return [
        _rule(section.heading),
        *(_line(line, "bold") for line in section.verdicts),
        _grid(table.header, table.rows, table.label_columns),
    ]


@section_parts.register
def _failures(section: FailuresSection) -> list[RenderableType]:
    table = section.table
    parts: list[RenderableType] = [_rule(section.heading)]
    if section.all_succeeded:
        parts.append(_line(section.all_succeeded, "green"))
    parts.append(_grid(table.header, table.rows, table.label_columns))
    parts += [_line(f"- {line}") for line in section.causes]
    parts += [Text.assemble(("note:", "yellow"), f" {note}") for note in section.notes]
    return parts


def _explained_table(section: MemorySection | TimingSection) -> list[RenderableType]:
    table = section.table
    return [
        _rule(section.heading),
        _line(section.about, "dim"),
        _grid(table.header, table.rows, table.label_columns),
    ]


section_parts.register(MemorySection, _explained_table)
section_parts.register(TimingSection, _explained_table)


@section_parts.register
def _warnings(section: WarningsSection) -> list[RenderableType]:
    parts: list[RenderableType] = [_rule(section.heading)]
    if not section.warnings:
        parts.append(_line("None.", "green"))
    for warning in section.warnings:
        where = "/".join(x for x in (warning.variant, warning.workload) if x)
        where = f" ({where})" if where else ""
        text = f" {warning.kind}{where}: {warning.message} (hint: {warning.hint})"
        parts.append(Text.assemble(("!", "yellow"), text))
    return parts


@section_parts.register
def _method(section: MethodSection) -> list[RenderableType]:
    return [_rule(section.heading), *(_line(f"- {note}", "dim") for note in section.notes)]


@section_parts.register
def _environment(section: EnvironmentSection) -> list[RenderableType]:
    table = RichTable(show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for label, value in section.rows:
        table.add_row(Text(label), Text(value))
    return [_rule(section.heading), table]


@section_parts.register
def _files(section: FilesSection) -> list[RenderableType]:
    return [
        _line(
            f"every run's raw numbers: {RUNS_JSON_FILE}, {RUNS_CSV_FILE}; the whole report as "
            f"one page: {HTML_FILE}",
            "dim",
        )
    ]
