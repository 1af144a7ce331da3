"""One experiment as the user sees it: results store, progress bar, tables.

This is the only place that prints while measuring; the runner itself only
calls back. After every run the database and the export directory's runs.jsonl
hold it; report.md and the --export-* files are rewritten once the runner moves
on from the runs that finished together (a block's), and when it stops, so
whatever happens next, the results so far are on disk in both raw and readable
form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from servelab.analysis.so_far import AnalysisSoFar
from servelab.config.experiment import Experiment
from servelab.config.load import Workload
from servelab.errors import ServelabError
from servelab.host.cpus import CpuPlan, plan_side_by_side
from servelab.host.procs import JANITOR
from servelab.measuring import (
    Launch,
    Measure,
    RunnerEvents,
    run_experiment,
    side_by_side_stack_size,
)
from servelab.measuring.stopping import NextRound, Outlook
from servelab.plugins.driver import LoadDriver, check_driver_can, get_driver
from servelab.prepare.environment import collect_environment, machine_differences
from servelab.report.base import MARKDOWN_FILE, ReportInput
from servelab.report.exports import write_result_files
from servelab.report.markdown import render_markdown
from servelab.report.sections import live_sections, report_sections
from servelab.report.terminal import render_terminal
from servelab.results.database import DB_FILE, Database, spec_hash
from servelab.results.profiles import read_profiles
from servelab.results.records import RunRecord
from servelab.results.store import ResultStore


def render_tables(
    console: Console,
    experiment: Experiment,
    runs: Sequence[RunRecord],
    *,
    environment: dict[str, Any] | None = None,
    min_effect_pct: float = 0.0,
    profiles: Mapping[tuple[str, str, int], str] | None = None,
) -> None:
    """The live report of ``runs`` in the terminal (``servelab results show``)."""
    sections = live_sections(
        experiment, environment or {}, runs, min_effect_pct=min_effect_pct, profiles=profiles
    )
    console.print(render_terminal(sections))


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
        extend_id: int | None = None,
        force: bool = False,
        measure: Measure = run_experiment,
        result_files: Mapping[str, Path] | None = None,
        listen_host: str | None = None,
        detail: bool = False,
        notes: tuple[str, ...] = (),
        profile: bool = False,
        setup: Mapping[str, Any] | None = None,
    ) -> None:
        self.experiment = experiment
        self.cpu_plan = cpu_plan
        self.out_dir = out_dir
        self.console = console
        self.out = out
        self.resume = resume
        self.extend_id = extend_id  # measured further, finished or not (RunOptions.extend_id)
        self.force = force
        self.measure = measure  # tests hand in a runner with a fake executor
        self.result_files = dict(result_files or {})  # --export-json ...: after every run
        self.listen_host = listen_host  # None: loopback (--listen)
        # Every run's line and the whole report (-v); else the bar, then the summary.
        self.detail = detail
        self.notes = notes  # said once everything is checked, under the header line
        self.profile = profile  # --profile: py-spy samples every measured window
        # Environment facts of what was set up around the stacks (the database, the apps'
        # interpreters): servelab.api.Prepared.setup, recorded with the machine's.
        self.setup = dict(setup or {})

    def _environment(self, driver: LoadDriver) -> dict[str, Any]:
        """The machine's facts, with the driver's version and where things run."""
        environment = collect_environment(self.setup)
        environment["driver_version"] = driver.version()
        environment["cpu_plan"] = {
            "stack": self.cpu_plan.stack,
            "driver": self.cpu_plan.driver,
            "stack_quota": self.cpu_plan.stack_quota,
            "cpu_priority": self.cpu_plan.cpu_priority,
        }
        if self.experiment.side_by_side:
            side = plan_side_by_side(
                self.cpu_plan, len(self.experiment.stacks),
                side_by_side_stack_size(self.experiment),
            )
            environment["cpu_plan"]["side_by_side"] = side.describe()
        return environment

    def _profiler(self) -> str | None:
        """py-spy's path when --profile asked for it and it can sample here; else None,
        having said in one line what is missing (measuring goes on without profiles)."""
        if not self.profile:
            return None
        from servelab.host.profiler import profiler_problem, py_spy

        problem = profiler_problem()
        if problem is not None:
            self.console.print(f"servelab: {problem}", highlight=False, markup=False)
            return None
        return py_spy()

    def _open_store(self, environment: dict[str, Any]) -> tuple[ResultStore, list[RunRecord]]:
        """A new store; with --resume the unfinished one of the same experiment; with
        ``extend_id`` that one, finished or not."""
        if not self.resume and self.extend_id is None:
            return ResultStore.create(self.out_dir, self.experiment, environment), []
        database = Database(self.out_dir / DB_FILE, create=True)
        if self.extend_id is not None:
            previous: int | None = self.extend_id
            if all(row.id != previous for row in database.list_experiments()):
                raise ServelabError(
                    f"no experiment #{previous} in {database.path} to measure further",
                    "give the id of an experiment stored there (servelab results list)",
                )
        else:
            previous = database.latest_unfinished(self.experiment)
        if previous is None:
            raise ServelabError(
                f"nothing to resume: no unfinished experiment {self.experiment.name!r} in "
                f"{database.path}",
                "run it without --resume",
            )
        stored = database.stored_hash(previous)
        if stored != spec_hash(self.experiment):
            anew = self.experiment.model_copy(update={"switching": False})
            raise ServelabError(
                f"experiment {self.experiment.name!r} has changed since #{previous} was started",
                # Begun before switched passes were the default, with a driver anew.
                "resume with --no-switch, as it was measured" if stored == spec_hash(anew)
                else "resume with the same file and options, or run without --resume",
            )
        differences = machine_differences(database.environment(previous), environment)
        if differences and not self.force:
            raise ServelabError(
                f"#{previous} was measured on another machine ({'; '.join(differences)})",
                "run without --resume, or pass --allow-other-machine to mix machines anyway",
            )
        store = ResultStore.from_database(database, previous)
        return store, store.runs()

    def run(self) -> ResultStore:
        experiment = self.experiment
        driver: LoadDriver = get_driver(experiment.driver, experiment.driver_options)
        for workload in experiment.workloads:  # before anything starts or is stored
            check_driver_can(driver, workload.request, workload.load, workload.name)
        driver.executable()
        driver.prepare(experiment.side_by_side)
        profiler = self._profiler()
        environment = self._environment(driver)
        store, stored = self._open_store(environment)
        total = len(experiment.stacks) * len(experiment.workloads) * experiment.repetitions
        self.console.print(
            f"[bold]{experiment.name}[/bold] {store.label}: {len(experiment.stacks)} variants x "
            f"{len(experiment.workloads)} workloads x {experiment.repetitions} repetitions = "
            f"{total} runs; {self.cpu_plan.describe()}"
        )
        for note in self.notes:
            self.console.print(f"servelab: {note}", highlight=False)
        if stored:
            self.console.print(f"resuming: {len(stored)} runs already stored are kept")
        live = LiveProgress(experiment, self.console, total, done=len(stored), detail=self.detail)
        unwritten: list[RunRecord] = []  # kept in the store, not yet in report.md
        # Every run so far, each one's own figures worked out once, as it comes (its
        # profile read from disk and parsed); the analysis across runs from them at each
        # report.
        so_far = AnalysisSoFar(experiment)

        def keep(run: RunRecord) -> None:
            so_far.add(run, read_profiles(store.path, [run]).get(
                (run.variant, run.workload, run.repetition)
            ))

        for run in stored:  # resumed: those already stored
            keep(run)

        def write_reports() -> None:
            """report.md and the --export-* files from every run so far. The runs of a
            block finish together: written once for the lot, when the runner moves on
            (its next event) or stops, since analysing every variant is not free."""
            if not unwritten:
                return
            unwritten.clear()
            report = ReportInput.so_far(so_far, environment)
            (store.path / MARKDOWN_FILE).write_text(
                render_markdown(report_sections(report, with_files=False))
            )
            write_result_files(self.result_files, report)

        def on_result(result: RunRecord) -> None:
            keep(result)  # the store already holds it (ResultStore.add)
            unwritten.append(result)
            live.show(result)

        progress = live.progress
        events = live.events(on_result, before_next=write_reports)
        finished = False
        try:
            with JANITOR.running(), progress:
                self.measure(
                    experiment,
                    store,
                    self.cpu_plan,
                    events=events,
                    driver=driver,
                    previous=so_far.runs,
                    so_far=so_far,
                    **({"listen_host": self.listen_host} if self.listen_host else {}),
                    **({"profiler": profiler} if profiler else {}),
                )
            finished = True
        except BaseException:
            if not so_far.runs:  # refused or stopped before it measured anything: none kept
                store.discard()
            raise
        finally:
            write_reports()
            runs = so_far.runs
            if runs:
                planned = max(int(live.progress.tasks[0].total or total), len(runs))
                if self.detail or len(runs) < planned or not finished:  # else: the last line
                    self.console.print(f"{len(runs)} of {planned} runs kept in {store.label}")
        store.mark_finished()
        # The live report once more, now with what the stopping rule said; the answer last.
        sections = report_sections(
            ReportInput.so_far(so_far, environment), with_files=False,
            outlook=outlook_lines(live.outlook),
        )
        (store.path / MARKDOWN_FILE).write_text(render_markdown(sections))
        self.out.print(render_terminal(sections, detail=self.detail))
        self.out.print(f"result {store.label}; report: {store.path / MARKDOWN_FILE}")
        return store


class LiveProgress:
    """The progress bar of a session and the runner's events that move it."""

    def __init__(
        self, experiment: Experiment, console: Console, total: int, done: int,
        *, detail: bool = True,
    ) -> None:
        self.experiment = experiment
        self.detail = detail  # a line per finished run and per round; else the bar alone
        self.round_note = ""  # the bar's prefix: which round of starts (without detail)
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("starting", total=total, completed=done)
        self.outlook: Outlook | None = None  # what the stopping rule said at the end
        self.workers_said: str | None = None  # the load's workers on other machines, as said
        self.said_beyond_budget = False  # the note that the budget cannot make all clear

    def events(
        self, on_result: Callable[[RunRecord], None], before_next: Callable[[], None] = lambda: None
    ) -> RunnerEvents:
        """The runner's events; ``before_next`` runs first whenever it moves on to something
        other than handing over a result."""

        def first(then: Callable[..., None]) -> Callable[..., None]:
            def event(*args: Any) -> None:
                before_next()
                then(*args)

            return event

        return RunnerEvents(
            on_launch=first(self._launching),
            on_measure=first(self._measuring),
            on_result=on_result,
            on_slice=first(self._slicing),
            on_round=first(self._round),
            on_note=first(self._note),
            on_driver=self._workers,
        )

    def _workers(self, workers: str) -> None:
        """The load driver's workers on other machines, named when a run's load starts
        with them (the driver's watch) if they changed since they were last named: the
        first run, a machine that joined or left. Once, not every run: each run is a
        master of its own, and the same line 36 times would bury the console."""
        if workers != self.workers_said:
            self.workers_said = workers
            self.progress.console.print(f"  load from workers: {escape(workers)}", highlight=False)

    def show(self, result: RunRecord) -> None:
        """One finished run's line above the bar (with ``detail``); the bar moves on. The
        run's workers are named here too if its start went unseen (a run too short for
        the driver's watch)."""
        workers = result.load.driver_details.get("workers")
        if workers is not None:
            self._workers(workers)
        if not self.detail:
            self.progress.advance(self.task)
            return
        load = result.load
        errors = f"[red]{load.errors} errors[/red]" if load.errors else "0 errors"
        self.progress.console.print(
            f"  {result.variant} / {result.workload} #{result.repetition}: "
            f"{load.rps:,.1f} req/s, mean {load.latency_mean_ms:.1f} ms, "
            f"p99 {load.latency_p99_ms:.1f} ms, {errors}",
            highlight=False,
        )
        self.progress.advance(self.task)

    def _describe(self, launch: Launch, doing: str, *, before: str = "") -> None:
        rounds = max(launch.repetition, self.experiment.repetitions)  # tune adds rounds
        run = f"run {launch.repetition}/{rounds} {launch.stack.name}"
        self.progress.update(self.task, description=f"{self.round_note}{before}{run}: {doing}")

    def _launching(self, launch: Launch) -> None:
        self._describe(launch, "starting stack")

    def _measuring(self, launch: Launch, workload: Workload) -> None:
        self._describe(launch, workload.name)

    def _slicing(self, launch: Launch, workload: Workload, k: int, n: int) -> None:
        self._describe(launch, workload.name, before=f"slice {k}/{n}: ")

    def _note(self, text: str) -> None:
        self.progress.console.print(f"  [yellow]![/yellow] {escape(text)}", highlight=False)

    def _round(self, plan: NextRound | None, outlook: Outlook | None) -> None:
        if plan is None:
            self.outlook = outlook
            return
        added = (plan.stacks or len(self.experiment.stacks)) * len(plan.workloads)
        self.progress.update(self.task, total=(self.progress.tasks[0].total or 0) + added)
        if outlook is not None and outlook.beyond_budget and not self.said_beyond_budget:
            # At the first look that knows it, not at the end.
            self.said_beyond_budget = True
            self._note(
                f"the budget cannot make every answer clear: {len(outlook.unclear)} of "
                f"{outlook.total} would need about {outlook.more_starts} more start(s) per "
                f"variant (~{outlook.more_seconds / 60:.1f} min of measuring, "
                f"{outlook.left_s:.0f} s left); measuring on until the budget ends "
                "(--budget to give more)"
            )
        so_far = (
            f"{outlook.clear}/{outlook.total} clear, ~{outlook.expected_s:.0f} s to go"
            if outlook is not None and outlook.total else ""
        )
        if not self.detail:  # said on the bar; why measuring stopped comes with the answer
            self.round_note = f"{plan.note}: " if plan.note else (
                f"{so_far}: " if so_far else "another round of starts: "
            )
            return
        so_far += "; " if so_far else ""
        self.progress.console.print(
            f"  {plan.note}" if plan.note else
            f"  {so_far}not clear yet: {', '.join(plan.workloads)}; another round of starts "
            f"({plan.passes} passes, ~{plan.expected_s:.0f} s)",
            highlight=False,
        )
