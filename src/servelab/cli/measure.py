"""The measuring commands: studies, study, run, ramp."""


from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from servelab.cli.how_to_run import run_options
from servelab.cli.options import (
    complete_study,
    console,
    failure_options,
    failure_study_options,
    out,
    parse_int_list,
)
from servelab.cli.replay import replay_options
from servelab.cli.user_app import app_options
from servelab.config.load import ReplaySpec
from servelab.config.run import RunOptions, UserApp
from servelab.errors import SpecError
from servelab.host.netns import check_somaxconn
from servelab.prepare.building import load_experiment
from servelab.registry import DEFAULT_DRIVER, DEFAULT_SERVER, DRIVER_NAMES, standalone_servers
from servelab.studies import StudyOptions, all_studies, check_options_apply, get_study


@click.command()
def studies() -> None:
    """List the ready-made studies."""
    for study in all_studies().values():
        out.print(
            f"[bold]{study.name:<22}[/bold] {study.summary}  [dim](seed: {study.source})[/dim]"
        )


@click.command()
@click.argument("name", shell_complete=complete_study)
@click.option("-r", "--repetitions", type=int, help="Runs per variant and workload (default 3).")
@click.option("-c", "--concurrency", type=int, help="Concurrent clients (closed model).")
@click.option("-n", "--requests", type=int, help="Requests per run.")
@click.option("-d", "--duration", type=float, help="Seconds per run.")
@click.option(
    "--driver", type=click.Choice(DRIVER_NAMES), help=f"Load driver (default {DEFAULT_DRIVER})."
)
@click.option(
    "--endpoints", help="Comma list of seed endpoints: sync-small,async-small,sync-big,async-big."
)
@click.option("--workers", help="Worker counts, e.g. '1-5' (workers-threads, gunicorn-vs-uvicorn).")
@click.option("--threads", help="Thread counts, e.g. '1-5' (workers-threads).")
@click.option("--warmup", type=int, help="Warm-up requests before each measured run.")
@failure_options
@app_options
@replay_options
@run_options
def study(
    name: str,
    repetitions: int | None,
    concurrency: int | None,
    requests: int | None,
    duration: float | None,
    driver: str | None,
    endpoints: str | None,
    workers: str | None,
    threads: str | None,
    warmup: int | None,
    user: UserApp,
    replay: ReplaySpec | None,
    run: RunOptions,
    **options: Any,
) -> None:
    """Run the ready-made study NAME (see `servelab studies`); with --app, on your app."""
    from servelab.prepare.user_app import check_study_accepts_app

    app = user.app
    # A study that serves the Django app itself takes the database options alone.
    database_given = user.database_given and not get_study(name).accepts_database
    if app is None and (user.request_given or database_given):
        raise SpecError(
            "--method, --path, --header, --body-file, --expect-status and --database "
            "(--db-latency, --db-jitter) need --app",
            "pass --app package.module:attr",
        )
    if app is not None:
        check_study_accepts_app(name, endpoints is not None)
    for label, value in (
        ("--repetitions", repetitions),
        ("--concurrency", concurrency),
        ("--requests", requests),
    ):
        if value is not None and value < 1:
            raise SpecError(f"{label} must be 1 or more, got {value}", f"pass {label} 1 or more")
    if duration is not None and duration <= 0:
        raise SpecError(f"--duration must be positive, got {duration}", "pass seconds > 0")
    if warmup is not None and warmup < 0:
        raise SpecError(f"--warmup must be 0 or more, got {warmup}", "pass 0 to skip warm-up")
    study_options = StudyOptions(
        repetitions=repetitions,
        concurrency=concurrency,
        requests=requests,
        duration_s=duration,
        driver=driver,
        endpoints=tuple(e.strip() for e in endpoints.split(",")) if endpoints else None,
        workers=parse_int_list(workers, "workers"),
        threads=parse_int_list(threads, "threads"),
        warmup_requests=warmup,
        **failure_study_options(**options),
    )
    from servelab import api

    check_options_apply(get_study(name), study_options)
    experiment, run = api.build_study(get_study(name), study_options, run)
    user = replace(user, replace_workloads=True, replay=replay)
    api.run(experiment, run, user, console=console, out=out)


@click.command()
@click.argument("file", type=click.Path(path_type=Path))
@app_options
@replay_options
@run_options
def run(file: Path, user: UserApp, replay: ReplaySpec | None, run: RunOptions) -> None:
    """Run the experiment described in the TOML file FILE; --app and the request
    options replace the file's app and requests, --replay its workloads."""
    from servelab import api

    api.run(load_experiment(file), run, replace(user, replay=replay), console=console, out=out)


@click.command()
@click.option("--start", type=float, default=50.0, show_default=True, help="First rate [req/s].")
@click.option("--max-rate", type=float, default=500.0, show_default=True, help="Last rate.")
@click.option("--step", type=float, help="Add this to the rate each step (default 50).")
@click.option("--factor", type=float, help="Multiply the rate by this each step instead.")
@click.option("--step-seconds", type=float, default=5.0, show_default=True)
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Per request [s].")
@click.option(
    "-c",
    "--concurrency",
    type=int,
    default=500,
    show_default=True,
    help="Most connections the driver opens to keep to the schedule.",
)
@click.option("--p99-ms", type=float, default=500.0, show_default=True, help="SLO: p99 limit.")
@click.option(
    "--max-error-ratio",
    type=float,
    default=0.01,
    show_default=True,
    help="SLO: most failed requests, as a ratio.",
)
@click.option(
    "--extra-steps",
    type=int,
    default=2,
    show_default=True,
    help="Steps past the SLO break spent looking for the first 502.",
)
@click.option(
    "--app",
    default="sleepy",
    show_default=True,
    help="Built-in app (sleepy, fastapi) or package.module:attr.",
)
@click.option("--sleep", type=float, help="sleepy app: seconds per request (default 0.01).")
@click.option("--method", default="GET", show_default=True)
@click.option("--path", default="/", show_default=True)
@click.option("--body", help="Request body (e.g. JSON).")
@click.option(
    "--server", type=click.Choice(standalone_servers()), default=DEFAULT_SERVER,
    help="The app server (behind nginx).",
)
@click.option("--worker-class", type=click.Choice(["sync", "gthread", "uvicorn"]))
@click.option("--workers", type=int, default=2, show_default=True)
@click.option("--transport", type=click.Choice(["tcp", "unix"]), default="unix")
@click.option("--somaxconn", type=int, help="Run in a namespace with this somaxconn.")
@click.option("--netns", type=click.Choice(["auto", "require", "off"]), default="auto")
@click.option("-r", "--repetitions", type=int, default=1, show_default=True)
@run_options
def ramp(
    start: float,
    max_rate: float,
    step: float | None,
    factor: float | None,
    step_seconds: float,
    timeout: float,
    concurrency: int,
    p99_ms: float,
    max_error_ratio: float,
    extra_steps: int,
    repetitions: int,
    sleep: float | None,
    run: RunOptions,
    **stack: Any,
) -> None:
    """Raise a fixed arrival rate step by step until the SLO breaks; report the highest
    sustainable rate and the rate of the first 502."""
    from servelab.measuring.ramp import RampOptions, RampPlan, build_ramp

    if repetitions < 1 or stack["workers"] < 1:
        raise SpecError("--repetitions and --workers must be 1 or more", "pass 1 or more")
    plan = RampPlan(
        start=start,
        stop=max_rate,
        step=step if step or factor else 50.0,
        factor=factor,
        step_s=step_seconds,
        timeout_s=timeout,
        concurrency=concurrency,
    )
    if stack["somaxconn"] is not None:
        check_somaxconn(stack["somaxconn"])
    from servelab import api

    experiment = build_ramp(
        RampOptions(
            plan=plan,
            p99_ms=p99_ms,
            max_error_ratio=max_error_ratio,
            extra_steps=extra_steps,
            sleep_s=sleep,
            repetitions=repetitions,
            **stack,
        )
    )
    api.run(experiment, run, console=console, out=out)


@click.command("locust-worker")
@click.option("--master-host", required=True, help="Address of the machine running servelab.")
@click.option("--master-port", type=int, default=5557, show_default=True)
@click.option(
    "--locustfile",
    default=None,
    help="The same locustfile as the master's (a copy on this machine), or a built-in "
    "scenario's name; default: the built-in 'request'.",
)
@click.option("--processes", type=int, default=1, show_default=True, help="Worker processes.")
@click.option("--name", help="This machine's name in the master's report (default: host name).")
def locust_worker(
    master_host: str, master_port: int, locustfile: str | None, processes: int, name: str | None
) -> None:
    """Run Locust workers on this machine for a servelab master elsewhere (--expect-workers),
    for a whole experiment: each run's master quits its workers, and every one is started
    again for the next run. Ctrl-C stops them all."""
    from servelab.load.locust_worker import (
        WorkerSupervisor,
        check_worker_locustfile,
        worker_command,
    )

    if processes < 1:
        raise SpecError(f"--processes must be 1 or more, got {processes}", "pass 1 or more")
    if not 1 <= master_port <= 65535:
        raise SpecError(f"--master-port {master_port} is not a port", "pass 1 to 65535")
    check_worker_locustfile(locustfile)
    argv = worker_command(master_host, master_port, locustfile, loglevel="WARNING")
    supervisor = WorkerSupervisor(
        argv, processes, machine=name,
        say=lambda line: console.print(line, highlight=False, markup=False),
        echo=lambda line: console.print(line, highlight=False, markup=False),
    )  # fmt: skip
    console.print(f"servelab: {processes} x {' '.join(argv)}", highlight=False, markup=False)
    console.print(
        f"servelab: {processes} worker process(es) on {supervisor.machine} wait for the "
        f"master at {master_host}:{master_port}; each run's master quits them and they "
        "start again for the next run; Ctrl-C stops them",
        highlight=False,
    )
    supervisor.run()
