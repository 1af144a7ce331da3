"""The report in the terminal, with rich: every kind of section (report/sections.py).

The same sections as the files, in the same order but for the answer, which
comes last: a terminal shows the end of what was printed. By default a session
ends on the compact view (``detail=False``, about one screen, as hyperfine's
summary): the title, one row per variant at a glance, a ramp's steps and the
failures when there were any, then the answer; the seed-style tables and the rest
are in report.md and the HTML report, and on the terminal with ``-v``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import singledispatch

from rich import box
from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.table import Table as RichTable
from rich.text import Text

from servelab.report import sections as kinds
from servelab.report.base import (
    CHARTS_DIR,
    HTML_FILE,
    RUNS_CSV_FILE,
    RUNS_JSON_FILE,
    Section,
    Table,
)
from servelab.report.tables import SeedTable

VERDICT_COLOURS = {"better": "green", "worse": "red"}
# The sections of the compact view besides the glance (failures only when some failed).
# (The title is left out: the session's first line names the experiment and its runs.)
COMPACT_KINDS = (kinds.RampSection, kinds.FailuresSection, kinds.RequestNamesSection,
                 kinds.AnswerSection)


# Said at the end of the compact view: where the rest of the report is.
MORE_DETAIL = "More (per-variant tables, failures, method, environment): report.md, or -v."


def render_terminal(sections: Sequence[Section], *, detail: bool = True) -> Group:
    """The sections as rich renderables, for ``console.print``: every one (``detail``), or
    the compact view a session ends on by default."""
    answers = [s for s in sections if isinstance(s, kinds.AnswerSection)]
    ordered = [s for s in sections if not isinstance(s, kinds.AnswerSection)] + answers
    if detail:
        return Group(*(part for section in ordered for part in section_parts(section)))
    parts: list[RenderableType] = []
    # The verdict on requests/s only where the answer is on requests/s: side by side, a
    # stack's requests/s is its share of the CPU, and the answer is per CPU second.
    verdicts = all(a.answer.metric == "rps" for a in answers)
    for section in ordered:
        if isinstance(section, kinds.GlanceSection):
            parts += _compact_glance(section, verdicts=verdicts)
        elif isinstance(section, kinds.FailuresSection) and section.all_succeeded:
            continue  # nothing failed: the glance's error column says so
        elif isinstance(section, COMPACT_KINDS):
            if isinstance(section, kinds.AnswerSection):
                parts.append(_line(MORE_DETAIL, "dim"))
            parts += section_parts(section)
    return Group(*parts)


def _rule(title: str) -> Rule:
    return Rule(Text(title, style="bold"))


def _line(text: str, style: str = "") -> Text:
    return Text(text, style=style)


def _grid(table: Table | SeedTable, title: str | None = None) -> RichTable:
    """The table with its label columns on the left and its figures aligned right.
    Every text is plain (``Text``): "[ms]" in a header is a unit, not rich markup."""
    grid = RichTable(title=Text(title) if title else None, title_justify="left")
    for index, column in enumerate(table.header):
        label = index < table.label_columns
        grid.add_column(Text(column), justify="left" if label else "right", no_wrap=label)
    for row in table.rows:
        grid.add_row(*map(Text, row))
    return grid


@singledispatch
def section_parts(section: Section) -> list[RenderableType]:
    """The rich renderables of one section."""
    raise TypeError(f"no terminal output for the {type(section).__name__}")


@section_parts.register
def _title(section: kinds.TitleSection) -> list[RenderableType]:
    return [_rule(section.name), _line(section.summary, "dim")]


@section_parts.register
def _answer(section: kinds.AnswerSection) -> list[RenderableType]:
    answer = section.answer
    parts: list[RenderableType] = [_rule(section.heading), _line(section.intro, "dim")]
    if not answer.workloads:
        parts.append(_line(section.nothing_yet))
    for workload in answer.workloads:
        parts.append(
            Text.assemble(
                (workload.workload, "bold"), f": {workload.headline}",
                f" ({workload.winner_note})",
            )
        )
        for line in workload.lines:
            parts.append(
                Text.assemble("  ", (line.text(), VERDICT_COLOURS.get(line.verdict, "")))
            )
    if answer.tests:
        parts.append(_line(f"test: {', '.join(answer.tests)}", "dim"))
    parts += [_line(text) for text in section.why]
    parts += [_line(text) for text in section.outlook]
    parts += [Text.assemble(("!", "yellow"), f" {group.text()}") for group in answer.warnings]
    return parts


@section_parts.register
def _glance(section: kinds.GlanceSection) -> list[RenderableType]:
    parts: list[RenderableType] = [_rule(section.heading)]
    header = ("Variant", "Requests/s", "p99 [ms]", "Errors", section.verdict_heading)
    for workload in section.workloads:
        rows = tuple(
            (r.variant + (" (baseline)" if r.is_baseline else ""), r.rps, r.p99_ms, r.errors,
             r.verdict)
            for r in workload.rows
        )
        parts.append(_grid(Table(header, rows), f"{workload.name}: {workload.description}"))
    return [*parts, _line(section.footnote, "dim")]


# The verdicts as the compact summary's last column says them.
SHORT_VERDICTS = {"no significant difference": "no significant diff."}


def _compact_glance(section: kinds.GlanceSection, *, verdicts: bool) -> list[RenderableType]:
    """Every workload's variants in one frameless table, a line each (hyperfine's
    summary): requests/s, p99, errors and (with ``verdicts``) the verdict on requests/s
    against the baseline."""
    grid = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    header = ("Workload", "Variant", "Requests/s", "p99 [ms]", "Errors", "vs baseline")
    for index, column in enumerate(header[:None if verdicts else -1]):
        grid.add_column(Text(column), justify="left" if index < 2 else "right",
                        no_wrap=index < 2)
    for workload in section.workloads:
        for row_index, r in enumerate(workload.rows):
            verdict = SHORT_VERDICTS.get(r.verdict_kind, r.verdict_kind)
            cells = [
                Text(workload.name if row_index == 0 else ""), Text(r.variant),
                Text(r.rps_mean or r.rps), Text(r.p99_ms), Text(r.errors),
            ]
            if verdicts:
                cells.append(Text(f"{r.change} {verdict}".strip() if r.change else verdict,
                                  style=VERDICT_COLOURS.get(r.verdict_kind, "")))
            grid.add_row(*cells)
    return [_rule(section.heading), grid]


@section_parts.register
def _charts(section: kinds.ChartsSection) -> list[RenderableType]:
    return [
        _rule(section.heading),
        *(_line(f"{c.title}: {CHARTS_DIR}/{c.name}.svg") for c in section.charts),
        *([_line(section.missing, "dim")] if section.missing else []),
    ]


@section_parts.register
def _seed_tables(section: kinds.SeedTablesSection) -> list[RenderableType]:
    parts: list[RenderableType] = []
    workload = None
    for item in section.tables:
        table = item.table
        if table.workload != workload:
            workload = table.workload
            parts.append(_rule(f"{section.heading}: {workload}"))
        baseline = " (baseline)" if table.is_baseline else ""
        title = f"{table.variant}{baseline}: {table.description}"
        parts.append(_grid(table, title))
        parts += [_line(f"  {line}", "dim") for line in item.spread]
        parts += [
            _line(f"  {v.text}", VERDICT_COLOURS.get(v.kind, "dim")) for v in item.verdicts
        ]
    return parts


@section_parts.register
def _ramp(section: kinds.RampSection) -> list[RenderableType]:
    return [
        _rule(section.heading),
        *(_line(line, "bold") for line in section.verdicts),
        _grid(section.table),
    ]


@section_parts.register
def _failures(section: kinds.FailuresSection) -> list[RenderableType]:
    parts: list[RenderableType] = [_rule(section.heading)]
    if section.all_succeeded:
        parts.append(_line(section.all_succeeded, "green"))
    parts.append(_grid(section.table))
    parts += [_line(f"- {line}") for line in section.causes]
    parts += [Text.assemble(("note:", "yellow"), f" {note}") for note in section.notes]
    return parts


@section_parts.register
def _why(section: kinds.WhySection) -> list[RenderableType]:
    parts: list[RenderableType] = [_rule(section.heading), _line(section.about, "dim")]
    parts += [_line(line) for line in section.lines]
    parts += [Text.assemble(("note:", "yellow"), f" {note}") for note in section.notes]
    return parts


@section_parts.register
def _explained_table(section: kinds.ExplainedTableSection) -> list[RenderableType]:
    return [
        _rule(section.heading),
        _line(section.about, "dim"),
        _grid(section.table),
    ]


@section_parts.register
def _warnings(section: kinds.WarningsSection) -> list[RenderableType]:
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
def _method(section: kinds.MethodSection) -> list[RenderableType]:
    return [_rule(section.heading), *(_line(f"- {note}", "dim") for note in section.notes)]


@section_parts.register
def _environment(section: kinds.EnvironmentSection) -> list[RenderableType]:
    table = RichTable(show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for label, value in section.rows:
        table.add_row(Text(label), Text(value))
    return [_rule(section.heading), table]


@section_parts.register
def _files(section: kinds.FilesSection) -> list[RenderableType]:
    return [
        _line(
            f"every run's raw numbers: {RUNS_JSON_FILE}, {RUNS_CSV_FILE}; the whole report as "
            f"one page: {HTML_FILE}",
            "dim",
        )
    ]
