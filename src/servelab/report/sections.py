"""A report as an ordered list of sections, built once from a stored experiment.

``report_sections`` is the one place that decides what a report holds and in
which order; the formats (``markdown``, ``html``, ``terminal``) only lay the
sections out, and each of them renders every kind of section defined here.
The live report (report.md rewritten after every run, and the terminal at the
end of a session) is the same list without the charts and the links to the
data files, which only ``servelab report`` writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from servelab.analysis.metrics import answer_metric
from servelab.config.experiment import Experiment
from servelab.report import machines, memory, names, replay, timing, why
from servelab.report.answer import Answer, answer_intro, build_answer
from servelab.report.base import (
    NO_MATPLOTLIB,
    ReportInput,
    Section,
    SummaryRow,
    Table,
    describe_workload,
    draw_if_installed,
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
from servelab.report.method import method_notes
from servelab.report.tables import VariantTable, variant_tables
from servelab.results.records import RunRecord

if TYPE_CHECKING:
    from servelab.analysis.warnings import ResultWarning
    from servelab.report.drawing import Chart


@dataclass(frozen=True)
class TitleSection(Section):
    kind = "title"
    heading = ""  # the experiment's name is the report's title

    name: str
    summary: str  # base.experiment_line


@dataclass(frozen=True)
class AnswerSection(Section):
    kind = "answer"
    heading = "Answer"
    nothing_yet = "No comparison yet: the baseline and a variant must both be measured."

    answer: Answer
    intro: str  # answer.answer_intro
    outlook: tuple[str, ...] = ()  # what the stopping rule said when measuring ended
    why: tuple[str, ...] = ()  # --profile: the functions behind each variant's difference


@dataclass(frozen=True)
class GlanceWorkload:
    name: str
    description: str  # base.describe_workload
    rows: tuple[SummaryRow, ...]


@dataclass(frozen=True)
class GlanceSection(Section):
    kind = "glance"
    heading = "At a glance"

    workloads: tuple[GlanceWorkload, ...]
    tests: tuple[str, ...]  # behind the verdicts; none without a comparison
    verdict_on: str = "requests/s"  # the answer's metric, the one verdict each row shows

    @property
    def verdict_heading(self) -> str:
        return f"Verdict on {self.verdict_on}"

    @property
    def footnote(self) -> str:
        """Where the verdicts come from: the tests the comparisons actually used."""
        if not self.tests:
            return "No verdicts yet: no variant has runs to compare with the baseline's."
        return (
            f"Verdicts on {self.verdict_on} against the baseline (95 %, Holm-adjusted) come "
            "from: "
            f"{', '.join(self.tests)}. \"No significant difference\" means the runs cannot "
            "tell the two apart, whatever the averages say."
        )


@dataclass(frozen=True)
class WhySection(Section):
    kind = "why"
    heading = "Why: where the CPU went"
    about: ClassVar[str] = why.ABOUT

    lines: tuple[str, ...]  # why.why_text: each variant against the baseline
    notes: tuple[str, ...] = ()  # what is missing from the profiles
    flames: tuple[why.FlameGraph, ...] = ()  # with the report's files only


@dataclass(frozen=True)
class ChartsSection(Section):
    kind = "charts"
    heading = "Charts"

    charts: tuple[Chart, ...]
    missing: str = ""  # why there are none (matplotlib is an extra)


@dataclass(frozen=True)
class SeedTablesSection(Section):
    kind = "tables"
    heading = "Seed-style tables"

    tables: tuple[VariantTable, ...]


@dataclass(frozen=True)
class RampSection(Section):
    kind = "ramp"
    heading = "Fixed-rate ramp"

    table: Table
    verdicts: tuple[str, ...]  # each run's breaking point (failures.ramp_summary_lines)


@dataclass(frozen=True)
class FailuresSection(Section):
    kind = "errors"
    heading = "Failures and their causes"

    table: Table
    causes: tuple[str, ...]  # one per class of log line seen (failures.cause_lines)
    notes: tuple[str, ...]  # the runs' own notes (failures.placement_notes)
    requests: int
    failed: int

    @property
    def all_succeeded(self) -> str | None:
        """A line saying so when no request failed."""
        if self.failed:
            return None
        return f"No failed request: all {self.requests:,} requests succeeded."


@dataclass(frozen=True)
class ExplainedTableSection(Section):
    """A table with a paragraph on how to read its figures."""

    about: ClassVar[str]

    table: Table


@dataclass(frozen=True)
class MemorySection(ExplainedTableSection):
    kind = "memory"
    heading = "Memory per worker"
    about = memory.ABOUT


@dataclass(frozen=True)
class RequestNamesSection(ExplainedTableSection):
    kind = "requests"
    heading = "Requests by name"

    ran: tuple[str, ...] = ()  # what the driver ran (names.driver_lines)

    @property
    def about(self) -> str:  # type: ignore[override]
        ran = " ".join(f"Ran {line}." for line in self.ran)
        return f"{names.ABOUT} {ran}".strip()


@dataclass(frozen=True)
class ReplaySection(ExplainedTableSection):
    kind = "replay"
    heading = "Replay fidelity"
    about = replay.ABOUT


@dataclass(frozen=True)
class RouteVerdictsSection(ExplainedTableSection):
    kind = "routes"
    heading = "Latency by route"
    about = replay.ROUTES_ABOUT


@dataclass(frozen=True)
class LoadMachinesSection(ExplainedTableSection):
    kind = "machines"
    heading = "Load by machine"
    about = machines.ABOUT


@dataclass(frozen=True)
class TimingSection(ExplainedTableSection):
    kind = "timing"
    heading = "Time per request (as ab prints it)"
    about = timing.ABOUT


@dataclass(frozen=True)
class WarningsSection(Section):
    kind = "warnings"
    heading = "Warnings"

    warnings: tuple[ResultWarning, ...]


@dataclass(frozen=True)
class MethodSection(Section):
    kind = "method"
    heading = "How it was measured"

    notes: tuple[str, ...]  # method.method_notes


@dataclass(frozen=True)
class EnvironmentSection(Section):
    kind = "environment"
    heading = "Environment"

    rows: tuple[tuple[str, str], ...]  # (label, value): base.environment_rows


@dataclass(frozen=True)
class FilesSection(Section):
    """The files written beside the report (base's file names): its closing line."""

    kind = "files"
    heading = ""


SECTION_KINDS: tuple[type[Section], ...] = (
    TitleSection,
    AnswerSection,
    GlanceSection,
    WhySection,
    ChartsSection,
    SeedTablesSection,
    RampSection,
    FailuresSection,
    MemorySection,
    RequestNamesSection,
    RouteVerdictsSection,
    ReplaySection,
    LoadMachinesSection,
    TimingSection,
    WarningsSection,
    MethodSection,
    EnvironmentSection,
    FilesSection,
)


def report_sections(
    report: ReportInput, *, with_files: bool = True, outlook: Sequence[str] = ()
) -> list[Section]:
    """Every section of ``report`` that has something to show, in order.

    ``with_files``: the report is written with its chart and data files (``servelab
    report``); without them (the live report) there are no charts and no links.
    """
    experiment, runs, analysis = report.experiment, report.runs, report.analysis
    answer = build_answer(analysis)
    profiles = why.run_profiles(report)
    explained = why.explained(report, profiles)
    sections: list[Section] = [
        TitleSection(experiment.name, experiment_line(report)),
        AnswerSection(
            answer, answer_intro(answer), tuple(outlook), tuple(why.answer_lines(explained))
        ),
        glance_section(report),
    ]
    if profiles:
        sections.append(WhySection(
            tuple(why.why_text(explained, profiles)), tuple(why.profile_notes(report)),
            tuple(why.flame_graphs(report, profiles)) if with_files else (),
        ))
    if with_files:
        # Imported here: matplotlib takes most of a second to load, which the live report
        # (after every run) and the commands that never draw a chart need not wait for.
        def draw() -> tuple[Chart, ...]:
            from servelab.report.charts import build_charts

            return tuple(build_charts(report))

        charts = draw_if_installed(draw)
        sections.append(ChartsSection(charts or (), missing="" if charts is not None
                                      else NO_MATPLOTLIB))
    sections.append(SeedTablesSection(tuple(variant_tables(analysis, runs))))
    sections += failure_sections(experiment, runs)
    memory_per_worker = memory.memory_table(experiment, runs)
    if memory_per_worker is not None:
        sections.append(MemorySection(memory_per_worker))
    by_name = names.names_table(experiment, runs)
    if by_name is not None:
        sections.append(RequestNamesSection(by_name, tuple(names.driver_lines(runs))))
    by_route = replay.route_verdict_table(runs, experiment.baseline.name)
    if by_route is not None:
        sections.append(RouteVerdictsSection(by_route))
    fidelity = replay.fidelity_table(runs)
    if fidelity is not None:
        sections.append(ReplaySection(fidelity))
    by_machine = machines.machines_table(runs)
    if by_machine is not None:
        sections.append(LoadMachinesSection(by_machine))
    time_per_request = timing.time_per_request_table(experiment, runs)
    if time_per_request is not None:
        sections.append(TimingSection(time_per_request))
    sections += [
        WarningsSection(analysis.all_warnings),
        MethodSection(tuple(method_notes(experiment))),
    ]
    if report.environment:  # results shown without their store have none
        sections.append(EnvironmentSection(tuple(environment_rows(report))))
    if with_files:
        sections.append(FilesSection())
    return sections


def live_sections(
    experiment: Experiment,
    environment: Mapping[str, Any],
    runs: Sequence[RunRecord],
    *,
    min_effect_pct: float = 0.0,
    outlook: Sequence[str] = (),
    profiles: Mapping[tuple[str, str, int], str] | None = None,
) -> list[Section]:
    """The live report: the runs so far, without charts or data files."""
    report = ReportInput.build(
        experiment, environment, runs, min_effect_pct=min_effect_pct, profiles=profiles
    )
    return report_sections(report, with_files=False, outlook=outlook)


def glance_section(report: ReportInput) -> GlanceSection:
    """One summary row per variant and workload, and the tests behind their verdicts."""
    workloads = tuple(
        GlanceWorkload(w.name, describe_workload(report, w.name), tuple(rows))
        for w in report.experiment.workloads
        if (rows := summary_rows(report, w.name))
    )
    metric = answer_metric(report.experiment)
    tests = {
        v.comparisons[metric.key].test
        for v in report.analysis.variants
        if metric.key in v.comparisons
    }
    return GlanceSection(workloads, tuple(sorted(tests)), metric.name)


def failure_sections(experiment: Experiment, runs: Sequence[RunRecord]) -> list[Section]:
    """A ramp's steps (experiments with an SLO), then every failure beside its causes."""
    if not runs:
        return []
    sections: list[Section] = []
    ramp = ramp_rows(experiment, runs)
    if ramp is not None:
        sections.append(RampSection(ramp, tuple(ramp_summary_lines(experiment, runs))))
    sections.append(
        FailuresSection(
            failure_rows(experiment, runs),
            tuple(cause_lines(runs)),
            tuple(placement_notes(runs)),
            sum(r.load.requests_total for r in runs),
            sum(r.load.errors for r in runs),
        )
    )
    return sections
