"""What every report format is given, and the one interface they share.

A ``ReportInput`` is a stored result (experiment, environment, raw runs) plus
its analysis (``servelab.analysis.analyze.analyze``: summaries, verdicts, warnings),
computed once. ``servelab.report.sections`` turns it into the report's sections
(``Section``: data, not text), and every format (a ``Renderer``: markdown, HTML,
the terminal) renders those same sections, so that they can never disagree.
This module imports no other module of the report package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from servelab.analysis.analyze import ExperimentAnalysis, analyze
from servelab.analysis.metrics import answer_metric
from servelab.analysis.profile import RunProfile, run_profiles
from servelab.analysis.so_far import AnalysisSoFar
from servelab.analysis.stats import p_text
from servelab.config.experiment import Experiment
from servelab.config.stack import StackSpec
from servelab.errors import ServelabError
from servelab.prepare.environment import describe_environment
from servelab.results.records import RunRecord

# File names inside a report directory, shared by the renderers that link to each other.
CHARTS_DIR = "charts"
MARKDOWN_FILE = "report.md"
HTML_FILE = "report.html"
SCREENSHOT_FILE = "report.png"
RUNS_JSON_FILE = "runs.json"
RUNS_CSV_FILE = "runs.csv"

if TYPE_CHECKING:
    from servelab.results.store import ResultStore

# Said instead of the charts when matplotlib (servelab's "charts" extra) is not installed.
NO_MATPLOTLIB = "no charts: matplotlib is not installed (fix: servelab setup)"

_Drawn = TypeVar("_Drawn")


def draw_if_installed(draw: Callable[[], _Drawn]) -> _Drawn | None:
    """``draw()``, or None when matplotlib (an extra, not the core) is not installed: the
    caller says NO_MATPLOTLIB instead of the charts. Any other missing module is a bug."""
    try:
        return draw()
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] != "matplotlib":
            raise
        return None


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def stack_knobs(stack: StackSpec, *, with_app: bool = False) -> dict[str, Any]:
    """Every knob of ``stack`` by dotted name ("server.workers": 2), its name left out."""
    exclude = {"name"} if with_app else {"name", "app"}
    return _flatten(stack.model_dump(mode="json", exclude=exclude))


def log_events(run: RunRecord) -> dict[str, int]:
    """The run's classified proxy/app log lines ("backlog overflow": 3); a record from
    before log attribution reads with none, the same as no classified line."""
    return dict(run.log_events)


def failure_breakdown(runs: Sequence[RunRecord]) -> dict[str, int]:
    """Failed requests of ``runs`` by cause, summed: HTTP codes, connection errors by kind.

    Keys: ``"HTTP 502"``, ``"connection: timeout"``. Log events are separate
    (:func:`log_breakdown`): they explain failures, they do not add to them.
    """
    counts: dict[str, int] = {}
    for run in runs:
        for code, n in run.load.status_counts.items():
            if n and code[0] not in "23":
                counts[f"HTTP {code}"] = counts.get(f"HTTP {code}", 0) + n
        for kind, n in run.load.connection_errors.items():
            if n:
                counts[f"connection: {kind}"] = counts.get(f"connection: {kind}", 0) + n
    return dict(sorted(counts.items()))


def log_breakdown(runs: Sequence[RunRecord]) -> dict[str, int]:
    """Classified log lines of ``runs``, summed by kind."""
    counts: dict[str, int] = {}
    for run in runs:
        for kind, n in log_events(run).items():
            if n:
                counts[kind] = counts.get(kind, 0) + n
    return dict(sorted(counts.items()))


def _check_some(runs: Sequence[RunRecord], source: str) -> None:
    if not runs:
        raise ServelabError(
            f"{source} has no finished run to report on",
            "let the experiment finish at least one run (servelab run --resume)",
        )


@dataclass(frozen=True)
class ReportInput:
    """One stored result, analysed; what every renderer reads."""

    experiment: Experiment
    environment: Mapping[str, Any]
    runs: tuple[RunRecord, ...]
    analysis: ExperimentAnalysis
    # Folded stacks of the profiled runs (--profile): (variant, workload, repetition) ->
    # their text (servelab.results.profiles); empty without profiles.
    profiles: Mapping[tuple[str, str, int], str] = field(default_factory=dict)
    # Those runs per request (analysis.profile.run_profiles of the texts above).
    run_profiles: tuple[RunProfile, ...] = ()

    @classmethod
    def build(
        cls,
        experiment: Experiment,
        environment: Mapping[str, Any],
        runs: Sequence[RunRecord],
        *,
        source: str = "the result",
        min_effect_pct: float = 0.0,
        profiles: Mapping[tuple[str, str, int], str] | None = None,
    ) -> ReportInput:
        """``runs`` analysed from scratch (a stored result)."""
        _check_some(runs, source)
        analysis = analyze(experiment, runs, min_effect_pct=min_effect_pct)
        folded = dict(profiles or {})
        # The design the runs answer in (side by side turned in turns: analysis.validity).
        return cls(
            analysis.experiment, dict(environment), tuple(runs), analysis, folded,
            tuple(run_profiles(runs, folded)),
        )

    @classmethod
    def so_far(
        cls,
        so_far: AnalysisSoFar,
        environment: Mapping[str, Any],
        *,
        source: str = "the result",
        min_effect_pct: float = 0.0,
    ) -> ReportInput:
        """A measuring session's runs so far, from what it kept as they came (the same
        report as ``build`` of those runs)."""
        runs = so_far.runs
        _check_some(runs, source)
        analysis = so_far.analysis(min_effect_pct=min_effect_pct)
        return cls(
            analysis.experiment, dict(environment), runs, analysis, so_far.folded,
            so_far.profiles,
        )

    @classmethod
    def from_store(cls, store: ResultStore, *, source: str | None = None) -> ReportInput:
        from servelab.results.profiles import read_profiles

        runs = store.runs()
        return cls.build(
            store.experiment, store.environment, runs, source=source or str(store.path),
            profiles=read_profiles(store.path, runs),
        )


@dataclass(frozen=True)
class Section:
    """One part of a report, as data; ``servelab.report.sections`` defines every kind."""

    kind: ClassVar[str]  # names the section in every format (the HTML section's id)
    heading: ClassVar[str]  # "" for the report's title and its closing line


@dataclass(frozen=True)
class Table:
    """A table as every format shows it: a header and rows of formatted cells; the first
    ``label_columns`` columns name the row, the others hold figures (aligned right)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    label_columns: int = 1


Output_co = TypeVar("Output_co", covariant=True)


class Renderer(Protocol[Output_co]):
    """One format of a report (markdown, HTML, the terminal): renders every kind of
    section, in the order given."""

    def __call__(self, sections: Sequence[Section]) -> Output_co: ...


# What each output format has (report/formats.py names each one's functions): the files
# it writes into a report directory (report/files.py), returning their paths, and the text
# of its --export-FORMAT file, rewritten after every run (report/exports.py).
FileWriter = Callable[[ReportInput, Sequence[Section], Path], list[Path]]
ExportRenderer = Callable[[ReportInput], str]


# ---------------------------------------------------------------------------
# What the markdown and HTML reports both show, computed once, formatted alike.


@dataclass(frozen=True)
class SummaryRow:
    """One variant on one workload, as the "at a glance" tables show it."""

    variant: str
    description: str
    is_baseline: bool
    rps: str  # "1,223 (95 % CI 941 … 1,505)"
    p99_ms: str
    errors: str  # "0" or "43 of 3,151 (1.36 %)"
    verdict: str  # "baseline", "better, +22.2 % (p = 0.003)", ...
    verdict_kind: str  # baseline | better | worse | no significant difference | ...
    rps_mean: str = ""  # "1,223": the mean alone (the terminal's compact summary)
    change: str = ""  # "+22.2 %" against the baseline; "" for the baseline or none


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def describe_workload(report: ReportInput, workload: str) -> str:
    """'POST /sync/items/; closed model, 50 clients, 1 s per run'."""
    found = next(w for w in report.experiment.workloads if w.name == workload)
    load = found.load
    if found.replay is not None:
        logs = ", ".join(found.replay.log)
        window = (
            f", seconds {found.replay.window[0]:g}-{found.replay.window[1]:g}"
            if found.replay.window else ""
        )
        return (
            f"replay of {logs}{window}: {load.requests or 0:,} requests at speed "
            f"{load.speed:g}, each at its logged time (open model) per run"
        )
    if load.model == "open":
        shape = f"open model, {load.rate:g} requests/s"
    else:
        keepalive = "" if load.keepalive else ", no client keepalive"
        shape = f"closed model, {load.concurrency} clients{keepalive}"
    bounds = []
    if load.requests is not None:
        bounds.append(f"{load.requests:,} requests")
    if load.duration_s is not None:
        bounds.append(f"{load.duration_s:g} s")
    return f"{found.request.method} {found.request.path}; {shape}, {' or '.join(bounds)} per run"


def summary_rows(report: ReportInput, workload: str) -> list[SummaryRow]:
    rows = []
    for found in report.analysis.for_workload(workload):
        rps = found.metrics["rps"]
        text = _number(rps.summary.mean)
        if rps.interval is not None:
            low, high = rps.interval
            text += f" (95 % CI {_number(low)} … {_number(high)})"
        else:
            text += f" ({rps.summary.n} run, no interval)"
        requests = sum(r.load.requests_total for r in found.runs)
        errors = found.total_errors
        errors_text = (
            f"{errors:,} of {requests:,} ({100 * errors / requests:.2f} %)"
            if errors and requests
            else f"{errors:,}"
        )
        change = ""
        if found.is_baseline:
            verdict, kind = "baseline", "baseline"
        else:
            comparison = found.comparisons.get(answer_metric(report.experiment).key)
            if comparison is None:
                verdict, kind = "no baseline runs", "inconclusive"
            else:
                kind = comparison.verdict
                verdict = comparison.verdict
                if comparison.difference_pct is not None:
                    change = f"{comparison.difference_pct:+.1f} %"
                    verdict += f", {change}"
                if comparison.p_adjusted is not None and (comparison.family or 0) > 1:
                    verdict += f" (Holm-adjusted p {p_text(comparison.p_adjusted)})"
                elif comparison.p_value is not None:
                    verdict += f" (p {p_text(comparison.p_value)})"
                elif comparison.verdict == "inconclusive":
                    verdict += f" ({comparison.reason})"
        rows.append(
            SummaryRow(
                found.variant,
                found.description,
                found.is_baseline,
                text,
                f"{found.metrics['latency_p99_ms'].summary.mean:,.1f}",
                errors_text,
                verdict,
                kind,
                _number(rps.summary.mean),
                change,
            )
        )
    return rows


def environment_rows(report: ReportInput) -> list[tuple[str, str]]:
    """(label, value) of the machine and tools the result was measured with."""
    return describe_environment(report.environment, report.experiment.driver)


def run_period(report: ReportInput) -> str:
    starts = sorted(r.started_at for r in report.runs)
    return starts[0] if starts[0] == starts[-1] else f"{starts[0]} to {starts[-1]}"


def experiment_line(report: ReportInput) -> str:
    """'3 variants × 2 workloads × 2 repetitions = 12 runs (12 finished), oha, ...'."""
    e = report.experiment
    planned = len(e.stacks) * len(e.workloads) * e.repetitions
    return (
        f"{len(e.stacks)} variants × {len(e.workloads)} workloads × {e.repetitions} "
        f"repetitions = {planned} runs ({len(report.runs)} finished), each on a freshly "
        f"started stack, {e.order} order, load by {e.driver}; measured {run_period(report)}"
    )


def load_result(ref: str, results_root: Path) -> tuple[ReportInput, Path, str]:
    """RESULT as users type it (an id in ``results_root``'s database, or a results
    directory): analysed, with its directory and a label naming it.

    The one place report and export resolve RESULT; ids and paths are the store's
    business (``servelab.results.store.resolve_result``).
    """
    from servelab.results.database import DB_FILE
    from servelab.results.store import resolve_result

    if ref.isdigit() and not (results_root / DB_FILE).exists():
        raise ServelabError(
            f"no result #{ref}: there is no results database at {results_root / DB_FILE}",
            "pass --results DIR (the directory holding servelab.db) or a results directory",
        )
    store = resolve_result(ref, results_root)
    label = store.label
    return ReportInput.from_store(store, source=label), store.path, label
