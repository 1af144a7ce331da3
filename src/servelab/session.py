"""One experiment as the user sees it: results store, progress bar, tables.

This is the only place that prints while measuring; the runner itself only
calls back. After every run the database holds the run and the export
directory's runs.jsonl and report.md are rewritten, so whatever happens next,
the results so far are on disk in both raw and readable form.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from servelab.analysis.analyze import analyze
from servelab.config.experiment import Experiment
from servelab.config.load import Workload
from servelab.errors import ServelabError
from servelab.host.cgroups import quota_unavailable_reason
from servelab.host.cpus import CpuPlan
from servelab.host.environment import collect_environment, machine_differences
from servelab.host.procs import JANITOR
from servelab.load import get_driver
from servelab.measure import Launch, RunnerEvents, run_experiment, run_key
from servelab.measure.stopping import NextRound, Outlook
from servelab.report.answer import answer_intro, build_answer
from servelab.report.failures import render_failures
from servelab.report.tables import experiment_markdown, seed_tables, verdict_lines
from servelab.results.records import RunResult
from servelab.results.store import DB_FILE, Database, ResultStore, spec_hash

REPORT_FILE = "report.md"


def report_notes(experiment: Experiment, environment: dict[str, Any]) -> list[str]:
    plan = environment.get("cpu_plan") or {}
    cpu_text = CpuPlan(
        plan.get("stack"),
        plan.get("driver"),
        plan.get("stack_quota"),
        # Results stored before CPU priority existed ran without it.
        cpu_priority=bool(plan.get("cpu_priority", False)),
    ).describe()
    return [
        f"CPU placement: {cpu_text}",
        f"Load driver: {experiment.driver} ("
        f"{environment.get('driver_version') or 'unknown version'})",
        f"Machine: {environment.get('cpu_model')}, {environment.get('cpu_count')} CPUs, "
        f"kernel {environment.get('kernel')}, somaxconn {environment.get('somaxconn')}",
        *([f"Database: {environment['database']}"] if environment.get("database") else []),
        f"Repetitions: {experiment.repetitions}, each on a freshly started stack, "
        f"variants {experiment.order}; before each run, warm-up rounds of "
        f"{warmup_size(experiment)} until requests/s settles within "
        f"{experiment.warmup.settle_pct:g} % (at most {experiment.warmup.max_rounds}), discarded",
        *([sliced_note(experiment)] if experiment.slices > 1 else []),
        *([stopping_note(experiment)] if experiment.stopping is not None else []),
        "Time per request is the mean latency the driver measured (closed model: "
        "concurrency / throughput, as ab reports it).",
    ]


def warmup_size(experiment: Experiment) -> str:
    if experiment.warmup.duration_s is not None:
        return f"{experiment.warmup.duration_s:g} s at the workload's concurrency"
    return f"{experiment.warmup.requests} requests"


def sliced_note(experiment: Experiment) -> str:
    slices = experiment.slices
    if experiment.side_by_side:
        return (
            f"Side by side: each round's stacks (one per variant) were measured at the same "
            f"time, {slices} slices each, one load driver per stack, sharing the stack's "
            "CPUs: every variant saw the same moments of the machine, so its drift cancels "
            "in the ratios. Figures are each stack's share of the CPUs; compare ratios. "
            "Effects that need a CPU to themselves (e.g. large answers through a small "
            "socket buffer) can read smaller or differ from runs in turns (--in-turns)"
        )
    return (
        f"Slices: each run measured in {slices} slices, interleaved with every other "
        "run's, all the runs' stacks alive at once: drift of the machine's own speed falls "
        "on every run alike, so the spread between repetitions is the stacks' own, and "
        "the absolute figures are an average over the whole measuring time"
    )


def stopping_note(experiment: Experiment) -> str:
    stopping = experiment.stopping
    assert stopping is not None
    return (
        f"Stopping: rounds of fresh starts added until every comparison's 95 % "
        f"interval (the answer's metric) is within ±{stopping.precision_pct:g} % or clear of "
        f"±{stopping.min_effect_pct:g} %, within {stopping.budget_s:g} s of measuring"
    )


def render_tables(
    console: Console,
    experiment: Experiment,
    runs: Sequence[RunResult],
    *,
    min_effect_pct: float = 0.0,
    outlook: Outlook | None = None,
) -> None:
    """Seed tables and verdicts in the terminal, then the answer."""
    analysis = analyze(experiment, runs, min_effect_pct=min_effect_pct)
    current = None
    for table in seed_tables(experiment, runs):
        if table.workload != current:
            current = table.workload
            console.rule(f"[bold]{current}")
        title = f"{table.variant}{' (baseline)' if table.is_baseline else ''}: {table.description}"
        rich_table = Table(title=title, title_justify="left")
        for index, column in enumerate(table.header):
            rich_table.add_column(column, justify="left" if index == 0 else "right")
        for row in table.rows:
            rich_table.add_row(*row)
        console.print(rich_table)
        for line in verdict_lines(analysis, table.workload, table.variant):
            colour = "green" if ": better" in line else "red" if ": worse" in line else "dim"
            console.print(f"  [{colour}]{line}[/{colour}]", highlight=False)
    render_failures(console, experiment, runs)  # status counts beside their logged causes
    render_answer(console, analysis, outlook)


def outlook_lines(outlook: Outlook | None) -> list[str]:
    """What the stopping rule said when measuring ended."""
    if outlook is None:
        return []
    lines = [f"measuring stopped: {outlook.reason}"]
    if outlook.unclear and outlook.more_starts:
        lines.append(
            f"{len(outlook.unclear)} comparison(s) not clear yet; about {outlook.more_starts} "
            f"more start(s) per variant, ~{outlook.more_seconds / 60:.1f} more minutes of "
            "measuring (--budget), would make them clear"
        )
    return lines


def render_answer(console: Console, analysis, outlook: Outlook | None = None) -> None:
    """The Answer block the terminal ends with: per workload one line per variant, the
    winner, then the warnings grouped by kind."""
    answer = build_answer(analysis)
    console.rule("[bold]Answer")
    console.print(f"[dim]{answer_intro(answer)}[/dim]", highlight=False)
    if not answer.workloads:
        console.print("no comparison: the baseline and a variant must both be measured")
    for workload in answer.workloads:
        console.print(
            f"[bold]{workload.workload}[/bold]: winner [bold]{workload.winner}[/bold] "
            f"({workload.winner_note})",
            highlight=False,
        )
        for line in workload.lines:
            colour = {"better": "green", "worse": "red"}.get(line.verdict, "default")
            mark = "" if line.clear else " [yellow](not clear)[/yellow]"
            console.print(f"  [{colour}]{line.text()}[/{colour}]{mark}", highlight=False)
    tests = sorted({line.test for w in answer.workloads for line in w.lines})
    if tests:
        console.print(f"[dim]test: {', '.join(tests)}[/dim]", highlight=False)
    for text in outlook_lines(outlook):
        console.print(text, highlight=False)
    for group in answer.warnings:
        console.print(f"[yellow]![/yellow] {group.text()}", highlight=False)


class ExperimentSession:
    def __init__(
        self,
        experiment: Experiment,
        cpu_plan: CpuPlan,
        out_dir: Path,
        *,
        console: Console,
        out: Console,
        resume: bool = False,
        force: bool = False,
        measure: Callable[..., list[RunResult]] = run_experiment,
    ) -> None:
        self.experiment = experiment
        self.cpu_plan = cpu_plan
        self.out_dir = out_dir
        self.console = console
        self.out = out
        self.resume = resume
        self.force = force
        self.measure = measure  # tests hand in a runner with a fake executor

    def _open_store(self, environment: dict[str, Any]) -> tuple[ResultStore, list[RunResult]]:
        """A new store, or with --resume the unfinished one of the same experiment."""
        if not self.resume:
            return ResultStore.create(self.out_dir, self.experiment, environment), []
        database = Database(self.out_dir / DB_FILE, create=True)
        previous = database.latest_unfinished(self.experiment)
        if previous is None:
            raise ServelabError(
                f"nothing to resume: no unfinished experiment {self.experiment.name!r} in "
                f"{database.path}",
                "run it without --resume",
            )
        if database.stored_hash(previous) != spec_hash(self.experiment):
            raise ServelabError(
                f"experiment {self.experiment.name!r} has changed since #{previous} was started",
                "resume with the same file and options, or run without --resume",
            )
        differences = machine_differences(database.environment(previous), environment)
        if differences and not self.force:
            raise ServelabError(
                f"#{previous} was measured on another machine ({'; '.join(differences)})",
                "run without --resume, or pass --force to mix machines anyway",
            )
        store = ResultStore.from_database(database, previous)
        return store, store.runs()

    def run(self) -> ResultStore:
        experiment = self.experiment
        driver = get_driver(experiment.driver)
        driver.executable()
        environment = collect_environment()
        environment["driver_version"] = driver.version()
        if self.cpu_plan.cpu_priority and quota_unavailable_reason() is not None:
            self.cpu_plan = replace(self.cpu_plan, cpu_priority=False)  # not root: say so
        environment["cpu_plan"] = {
            "stack": self.cpu_plan.stack,
            "driver": self.cpu_plan.driver,
            "stack_quota": self.cpu_plan.stack_quota,
            "cpu_priority": self.cpu_plan.cpu_priority,
        }
        store, runs = self._open_store(environment)
        notes = report_notes(experiment, environment)
        done = {run_key(r.variant, r.workload, r.repetition) for r in runs}
        total = len(experiment.stacks) * len(experiment.workloads) * experiment.repetitions
        self.console.print(
            f"[bold]{experiment.name}[/bold] {store.label}: {len(experiment.stacks)} variants x "
            f"{len(experiment.workloads)} workloads x {experiment.repetitions} repetitions = "
            f"{total} runs; {self.cpu_plan.describe()}"
        )
        if done:
            self.console.print(f"resuming: {len(done)} runs already stored are kept")
        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        task = progress.add_task("starting", total=total, completed=len(done))

        def on_launch(launch: Launch) -> None:
            progress.update(
                task,
                description=f"run {launch.repetition}/{experiment.repetitions} "
                f"{launch.stack.name}: starting stack",
            )

        def on_measure(launch: Launch, workload: Workload) -> None:
            progress.update(
                task,
                description=f"run {launch.repetition}/{experiment.repetitions} "
                f"{launch.stack.name}: {workload.name}",
            )

        def on_result(result: RunResult) -> None:
            runs.append(result)
            (store.path / REPORT_FILE).write_text(experiment_markdown(experiment, runs, notes))
            load = result.load
            errors = f"[red]{load.errors} errors[/red]" if load.errors else "0 errors"
            progress.console.print(
                f"  {result.variant} / {result.workload} #{result.repetition}: "
                f"{load.rps:,.1f} req/s, mean {load.latency_mean_ms:.1f} ms, "
                f"p99 {load.latency_p99_ms:.1f} ms, {errors}",
                highlight=False,
            )
            progress.advance(task)

        state: dict[str, Outlook | None] = {"outlook": None}

        def on_round(plan: NextRound | None, outlook: Outlook | None) -> None:
            if plan is None:
                state["outlook"] = outlook
                return
            added = len(experiment.stacks) * len(plan.workloads)
            progress.update(task, total=(progress.tasks[0].total or 0) + added)
            progress.console.print(
                f"  not clear yet: {', '.join(plan.workloads)}; another round of starts "
                f"({plan.passes} passes, ~{plan.expected_s:.0f} s)",
                highlight=False,
            )

        def on_slice(launch: Launch, workload: Workload, k: int, n: int) -> None:
            progress.update(
                task,
                description=f"slice {k}/{n}: run {launch.repetition}/{experiment.repetitions} "
                f"{launch.stack.name}: {workload.name}",
            )

        events = RunnerEvents(
            on_launch=on_launch,
            on_measure=on_measure,
            on_result=on_result,
            on_slice=on_slice,
            on_round=on_round,
        )
        try:
            with JANITOR.running(), progress:
                self.measure(
                    experiment,
                    store,
                    self.cpu_plan,
                    events=events,
                    driver=driver,
                    previous=tuple(runs),
                )
        finally:
            if runs:
                self.console.print(f"{len(runs)} of {total} runs kept in {store.label}")
        store.mark_finished()
        render_tables(self.out, experiment, runs, outlook=state["outlook"])
        for note in notes:
            self.out.print(f"[dim]- {note}[/dim]", highlight=False)
        self.out.print(f"result {store.label}; report: {store.path / REPORT_FILE}")
        return store
