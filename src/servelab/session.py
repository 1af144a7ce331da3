"""One experiment as the user sees it: results directory, progress bar, tables.

This is the only place that prints while measuring; the runner itself only
calls back. The markdown report is rewritten after every run, so whatever
happens next, the results so far are on disk in both raw and readable form.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from servelab.cpus import CpuPlan
from servelab.environment import collect_environment
from servelab.load import get_driver
from servelab.report.tables import experiment_markdown, seed_tables
from servelab.results import RunResult
from servelab.runner import Launch, RunnerEvents, run_experiment
from servelab.spec import Experiment, Workload
from servelab.store import ResultStore

REPORT_FILE = "report.md"


def report_notes(experiment: Experiment, environment: dict, cpu_plan_text: str) -> list[str]:
    return [
        f"CPU placement: {cpu_plan_text}",
        f"Load driver: {experiment.driver} ("
        f"{environment.get('driver_version') or 'unknown version'})",
        f"Machine: {environment.get('cpu_model')}, {environment.get('cpu_count')} CPUs, "
        f"kernel {environment.get('kernel')}, somaxconn {environment.get('somaxconn')}",
        f"Repetitions: {experiment.repetitions}, each on a freshly started stack, "
        f"variants interleaved; {experiment.warmup.requests} warm-up requests discarded per run",
        "Time per request is the mean latency the driver measured (closed model: "
        "concurrency / throughput, as ab reports it).",
    ]


def render_tables(console: Console, experiment: Experiment, runs: Sequence[RunResult]) -> None:
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


class ExperimentSession:
    def __init__(
        self,
        experiment: Experiment,
        cpu_plan: CpuPlan,
        out_dir: Path,
        *,
        console: Console,
        out: Console,
    ) -> None:
        self.experiment = experiment
        self.cpu_plan = cpu_plan
        self.out_dir = out_dir
        self.console = console
        self.out = out

    def run(self) -> ResultStore:
        experiment = self.experiment
        driver = get_driver(experiment.driver)
        driver.executable()
        environment = collect_environment()
        environment["driver_version"] = driver.version()
        environment["cpu_plan"] = {"stack": self.cpu_plan.stack, "driver": self.cpu_plan.driver}
        store = ResultStore.create(self.out_dir, experiment, environment)
        notes = report_notes(experiment, environment, self.cpu_plan.describe())
        runs: list[RunResult] = []
        total = len(experiment.stacks) * len(experiment.workloads) * experiment.repetitions
        self.console.print(
            f"[bold]{experiment.name}[/bold]: {len(experiment.stacks)} variants x "
            f"{len(experiment.workloads)} workloads x {experiment.repetitions} "
            f"repetitions = {total} runs; {self.cpu_plan.describe()}"
        )
        self.console.print(f"results: {store.path}")
        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        task = progress.add_task("starting", total=total)

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

        events = RunnerEvents(on_launch=on_launch, on_measure=on_measure, on_result=on_result)
        try:
            with progress:
                run_experiment(experiment, store, self.cpu_plan, events=events, driver=driver)
        finally:
            if runs:
                self.console.print(f"{len(runs)} of {total} runs kept in {store.path}")
        render_tables(self.out, experiment, runs)
        for note in notes:
            self.out.print(f"[dim]- {note}[/dim]", highlight=False)
        self.out.print(
            f"raw results: {store.path / 'runs.jsonl'}; report: {store.path / REPORT_FILE}"
        )
        return store
