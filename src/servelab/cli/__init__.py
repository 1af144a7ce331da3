"""Command line: parses options and calls the library. No measuring logic here."""

from __future__ import annotations

import functools
import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from servelab import api
from servelab.apps.user import UserRequest
from servelab.config.building import load_experiment_file
from servelab.config.run import DEFAULT_RESULTS_DIR, RunOptions, parse_duration
from servelab.config.stack import AppSpec
from servelab.errors import ServelabError, SpecError
from servelab.host.netns import check_somaxconn
from servelab.load.registry import DEFAULT_DRIVER, DRIVER_NAMES
from servelab.servers.registry import SERVER_KINDS, standalone_servers
from servelab.studies import StudyOptions, all_studies, get_study

console = Console(stderr=True, soft_wrap=True)  # an error stays one line, however long
out = Console()
if not out.is_terminal:
    # Piped or redirected: wide enough that the seed tables do not wrap.
    out.width = 160


def parse_int_list(text: str | None, what: str) -> tuple[int, ...] | None:
    """'1-3,5' -> (1, 2, 3, 5); values must be >= 1."""
    if text is None:
        return None
    values: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                values.extend(range(low, high + 1))
            else:
                values.append(int(part))
    except ValueError:
        raise SpecError(f"invalid {what} list {text!r}", "write e.g. '1-5' or '1,2,4'") from None
    if not values or min(values) < 1:
        raise SpecError(f"{what} must be 1 or more, got {text!r}", "write e.g. '1-5' or '1,2,4'")
    return tuple(values)


# The options of every measuring command, collected into one RunOptions (see run_options).
_run_options = [
    click.option("--stack-cpus", help="CPUs for the stack (taskset list, e.g. '0').", default=None),
    click.option("--driver-cpus", help="CPUs for the load driver (e.g. '1').", default=None),
    click.option("--no-pin", is_flag=True, help="Do not pin stack and driver to separate CPUs."),
    click.option(
        "--stack-cpu-quota",
        "stack_cpu_quota",
        type=float,
        default=None,
        help="Cap the stack's CPU time at this many CPUs (a cgroup, like a container's "
        "--cpus; needs root).",
    ),
    click.option(
        "--no-cpu-priority",
        is_flag=True,
        help="Do not favour the stack and the driver over other processes (by default, "
        "as root, a cgroup gives them 100x the CPU weight of other work).",
    ),
    click.option(
        "--results",
        "results_dir",
        type=click.Path(path_type=Path),
        default=DEFAULT_RESULTS_DIR,
        show_default=True,
        help="The results directory: servelab.db and one directory per experiment.",
    ),
    click.option(
        "--out",
        "legacy_out",
        type=click.Path(path_type=Path),
        default=None,
        hidden=True,
        help="Old name of --results.",
    ),
    click.option(
        "--resume",
        is_flag=True,
        help="Continue the unfinished experiment of the same name; finished runs are "
        "kept, none is repeated.",
    ),
    click.option(
        "--allow-other-machine",
        is_flag=True,
        help="With --resume: continue an experiment begun on another machine.",
    ),
    click.option(
        "--order",
        type=click.Choice(["interleaved", "random"]),
        default=None,
        help="Run order of the variants in each round (default interleaved).",
    ),
    click.option("--seed", type=int, default=None, help="Seed of the random order."),
    click.option(
        "--slices",
        type=click.IntRange(min=1),
        default=None,
        help="Measure each run in this many slices, interleaved with every other run's, "
        "all runs' stacks alive at once: a machine whose speed drifts then drifts alike "
        "for every run (oha, closed loads; default: about one second a slice; 1: each "
        "run in one piece, in turn).",
    ),
    click.option(
        "--side-by-side/--in-turns",
        "side_by_side",
        default=None,
        help="Measure each round's stacks at the same time (sharing the stack CPUs: the "
        "machine's drift cancels; quick's default), or in turns, one stack at a time.",
    ),
    click.option(
        "--precision",
        "precision_pct",
        type=float,
        default=None,
        help="Keep measuring until every requests/s comparison's 95 % interval is within "
        "± this many percent (or clear of --min-effect), or --budget is spent.",
    ),
    click.option(
        "--budget",
        default=None,
        help="Wall time measuring may take, e.g. '3m', '90s', '1h' (with --precision; "
        "each study has a default).",
    ),
    click.option(
        "--min-effect",
        "min_effect_pct",
        type=float,
        default=None,
        help="Smallest change in percent that counts; an interval entirely beyond ± it "
        "is a clear answer.",
    ),
]


def run_options(func):
    """Add the measuring options to a command, handed to it as one ``run`` (RunOptions)."""
    names = ("stack_cpus", "driver_cpus", "no_pin", "stack_cpu_quota", "no_cpu_priority",
             "results_dir", "legacy_out", "resume", "allow_other_machine", "order", "seed",
             "slices", "side_by_side", "precision_pct", "budget", "min_effect_pct")

    @functools.wraps(func)
    def with_run_options(*args, **kwargs):
        given = {name: kwargs.pop(name) for name in names}
        run = RunOptions(
            results_dir=given["legacy_out"] or given["results_dir"],
            stack_cpus=given["stack_cpus"],
            driver_cpus=given["driver_cpus"],
            pin=not given["no_pin"],
            stack_cpu_quota=given["stack_cpu_quota"],
            cpu_priority=not given["no_cpu_priority"],
            resume=given["resume"],
            allow_other_machine=given["allow_other_machine"],
            order=given["order"],
            seed=given["seed"],
            slices=given["slices"],
            side_by_side=given["side_by_side"],
            precision_pct=given["precision_pct"],
            budget_s=parse_duration(given["budget"]) if given["budget"] is not None else None,
            min_effect_pct=given["min_effect_pct"],
        )
        return func(*args, run=run, **kwargs)

    for option in reversed(_run_options):
        with_run_options = option(with_run_options)
    return with_run_options


_failure_options = [
    click.option("--rate", type=float, help="Arrival rate, requests/s (backlog, recycling)."),
    click.option("--sleep", type=float, help="Seconds the sleepy app holds a worker (backlog)."),
    click.option("--somaxconn", help="net.core.somaxconn values, e.g. '128,1024' (backlog)."),
    click.option(
        "--netns",
        type=click.Choice(["auto", "require", "off"]),
        help="Private network namespace for somaxconn: auto (default), require, or off "
        "(emulate it with the app's backlog).",
    ),
    click.option("--timeout", type=float, help="Per-request timeout of the load driver [s]."),
]


def failure_options(func):
    for option in reversed(_failure_options):
        func = option(func)
    return func


_app_options = [
    click.option(
        "--app",
        "app_ref",
        help="Your app: package.module:attr (ASGI or WSGI; a factory attr() is called).",
    ),
    click.option(
        "--app-dir",
        type=click.Path(path_type=Path),
        help="Directory holding the app's top-level package (default: cwd).",
    ),
    click.option("--method", help="HTTP method of the request sent to --app (default GET)."),
    click.option("--path", "req_path", help="Path of the request (default /)."),
    click.option("--header", "headers", multiple=True, help="'Name: value'; repeatable."),
    click.option("--body-file", type=click.Path(path_type=Path), help="Request body file."),
    click.option(
        "--expect-status",
        type=int,
        help="Status the request must get (default 200); checked before measuring.",
    ),
    click.option(
        "--database",
        type=click.Choice(["sqlite", "postgresql"]),
        help="--app django: its database, seeded; postgresql is servelab's own server "
        "(default sqlite).",
    ),
    click.option(
        "--db-latency",
        type=float,
        help="--app django: add MS milliseconds to every round trip to PostgreSQL (a slow "
        "link: netem where the kernel has it, else toxiproxy); implies --database postgresql.",
    ),
    click.option(
        "--db-jitter",
        type=float,
        help="With --db-latency: each round trip's delay varies by up to ± MS.",
    ),
    click.option(
        "--startup-timeout",
        type=float,
        default=30.0,
        show_default=True,
        help="Seconds the pre-measurement check waits for the app's answer.",
    ),
]


@dataclass(frozen=True)
class UserInput:
    """What --app and its companion options asked for: the app (None: the study's or
    file's own), the request, the database options and the start-up check's timeout."""

    app: AppSpec | None
    request: UserRequest
    database: str | None
    db_latency: float | None
    db_jitter: float | None
    startup_timeout_s: float

    @property
    def database_given(self) -> bool:
        return any(v is not None for v in (self.database, self.db_latency, self.db_jitter))

    def applied_to(self, run: RunOptions, *, replace_workloads: bool = False) -> RunOptions:
        """``run`` with the user's app, request and database options."""
        return replace(
            run, app=self.app, request=self.request, database=self.database,
            db_latency_ms=self.db_latency, db_jitter_ms=self.db_jitter,
            startup_timeout_s=self.startup_timeout_s, replace_workloads=replace_workloads,
        )


def app_options(func):
    """Add the --app options to a command, handed to it as one ``user`` (a UserInput)."""

    @functools.wraps(func)
    def with_user_input(
        *args,
        app_ref,
        app_dir,
        method,
        req_path,
        headers,
        body_file,
        expect_status,
        database,
        db_latency,
        db_jitter,
        startup_timeout,
        **kwargs,
    ):
        if app_dir is not None and app_ref is None:
            raise SpecError("--app-dir needs --app", "pass --app package.module:attr")
        user = UserInput(
            app=AppSpec(ref=app_ref, app_dir=app_dir) if app_ref is not None else None,
            request=UserRequest(method, req_path, tuple(headers), body_file, expect_status),
            database=database,
            db_latency=db_latency,
            db_jitter=db_jitter,
            startup_timeout_s=startup_timeout,
        )
        return func(*args, user=user, **kwargs)

    for option in reversed(_app_options):
        with_user_input = option(with_user_input)
    return with_user_input


def failure_study_options(rate, sleep, somaxconn, netns, timeout) -> dict:
    """StudyOptions fields of the failure-mode studies, from their CLI options."""
    try:
        values = tuple(int(v) for v in somaxconn.split(",")) if somaxconn else None
    except ValueError:
        raise SpecError(
            f"invalid --somaxconn list {somaxconn!r}", "write values with commas, e.g. '128,1024'"
        ) from None
    for label, value in (("--rate", rate), ("--sleep", sleep), ("--timeout", timeout)):
        if value is not None and not value > 0:
            raise SpecError(f"{label} must be positive, got {value:g}", f"pass {label} > 0")
    if values:
        for value in values:
            check_somaxconn(value)
    return {
        "rate": rate,
        "sleep_s": sleep,
        "somaxconn": values,
        "netns": netns,
        "timeout_s": timeout,
    }


@click.group()
@click.version_option(package_name="servelab")
def cli() -> None:
    """Measure how to serve a Python web app on this machine."""


@cli.command()
def studies() -> None:
    """List the ready-made studies."""
    for study in all_studies().values():
        out.print(
            f"[bold]{study.name:<22}[/bold] {study.summary}  [dim](seed: {study.source})[/dim]"
        )


@cli.command()
@click.argument("name")
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
@run_options
def study(
    name: str,
    repetitions,
    concurrency,
    requests,
    duration,
    driver,
    endpoints,
    workers,
    threads,
    warmup,
    user: UserInput,
    run: RunOptions,
    **options,
) -> None:
    """Run the ready-made study NAME (see `servelab studies`); with --app, on your app."""
    from servelab.apps.user import check_study_accepts_app

    app = user.app
    # A study that serves the Django app itself takes the database options alone.
    database_given = user.database_given and not get_study(name).accepts_database
    if app is None and (user.request.given or database_given):
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
    api.run(
        get_study(name).build(study_options), user.applied_to(run, replace_workloads=True),
        console=console, out=out,
    )


@cli.command()
@click.argument("file", type=click.Path(path_type=Path))
@app_options
@run_options
def run(file: Path, user: UserInput, run: RunOptions) -> None:
    """Run the experiment described in the TOML file FILE; --app and the request
    options replace the file's app and requests."""
    api.run(load_experiment_file(file), user.applied_to(run), console=console, out=out)


@cli.command()
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
    "--server", type=click.Choice(standalone_servers()), default=SERVER_KINDS[0],
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
    start,
    max_rate,
    step,
    factor,
    step_seconds,
    timeout,
    concurrency,
    p99_ms,
    max_error_ratio,
    extra_steps,
    repetitions,
    sleep,
    run: RunOptions,
    **stack,
) -> None:
    """Raise a fixed arrival rate step by step until the SLO breaks; report the highest
    sustainable rate and the rate of the first 502."""
    from servelab.measure.ramp import RampOptions, RampPlan, build_ramp

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


_results_dir = click.option(
    "--results",
    "results_dir",
    type=click.Path(path_type=Path),
    default=DEFAULT_RESULTS_DIR,
    show_default=True,
    help="The results directory holding servelab.db (where RESULT ids are looked up).",
)
_min_effect = click.option(
    "--min-effect",
    type=float,
    default=0.0,
    show_default=True,
    help="Smallest difference, in percent, that counts as a real change.",
)


@cli.group()
def results() -> None:
    """Stored results: list, show, compare."""


@results.command("list")
@_results_dir
def results_list(results_dir: Path) -> None:
    """List the experiments stored in --results."""
    from servelab.results.store import DB_FILE, Database

    rows = Database(results_dir / DB_FILE).list_experiments()
    table = Table(title=f"results in {results_dir / DB_FILE}", title_justify="left")
    for column in ("id", "name", "started", "runs", "state", "machine", "export"):
        table.add_column(column)
    for row in rows:
        state = "finished" if row.finished_at else "unfinished (--resume)"
        table.add_row(
            str(row.id),
            row.name,
            row.created_at,
            f"{row.runs}/{row.planned}",
            state,
            row.hostname,
            row.export_dir,
        )
    out.print(table)


@results.command("show")
@click.argument("result")
@_results_dir
@_min_effect
@click.option(
    "--json", "as_json", is_flag=True, help="Print the comparisons as JSON instead of tables."
)
@click.option(
    "--precision",
    "precision_pct",
    type=float,
    default=None,
    help="The precision a comparison must reach to be clear (default: the experiment's, or 5).",
)
def results_show(
    result: str, results_dir: Path, min_effect: float, as_json: bool, precision_pct: float | None
) -> None:
    """Print the tables, verdicts and warnings of RESULT (an id or a results directory)."""
    from servelab.results.store import resolve_result
    from servelab.session import render_tables

    store = resolve_result(result, results_dir)
    if as_json:
        import json

        from servelab.analysis.analyze import analyze, comparisons_document

        analysis = analyze(store.experiment, store.runs(), min_effect_pct=min_effect)
        document = comparisons_document(analysis, precision_pct, min_effect)
        click.echo(json.dumps(document, indent=2))
        return
    render_tables(out, store.experiment, store.runs(), min_effect_pct=min_effect)


@results.command("compare")
@click.argument("first")
@click.argument("second")
@_results_dir
@_min_effect
@click.option(
    "--allow-other-machine", is_flag=True, help="Compare results from different machines anyway."
)
def results_compare(
    first: str, second: str, results_dir: Path, min_effect: float, allow_other_machine: bool
) -> None:
    """Compare each variant of SECOND against the same variant of FIRST."""
    from servelab.analysis.analyze import METRIC_BY_KEY, compare_results, verdict_line
    from servelab.host.environment import machine_differences
    from servelab.results.store import resolve_result

    a, b = resolve_result(first, results_dir), resolve_result(second, results_dir)
    differences = machine_differences(a.environment, b.environment)
    if differences and not allow_other_machine:
        raise ServelabError(
            f"{first} and {second} were measured on different machines ({'; '.join(differences)})",
            "compare results from one machine, or pass --allow-other-machine",
        )
    pairs = compare_results(a.runs(), b.runs(), min_effect_pct=min_effect)
    if not pairs:
        raise ServelabError(
            f"{first} and {second} share no (variant, workload)",
            "compare results of the same study or experiment file",
        )
    for (workload, variant), comparisons in pairs.items():
        out.rule(f"[bold]{workload} / {variant}: {second} against {first}")
        for key, comparison in comparisons.items():
            out.print(f"  {verdict_line(METRIC_BY_KEY[key], comparison)}", highlight=False)


@cli.command()
@click.argument("result")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the report goes (default: RESULT's directory/report).",
)
@_results_dir
@click.option("--overwrite", is_flag=True, help="Replace the report's files in a non-empty --out.")
@click.option(
    "--screenshot", is_flag=True, help="Also open the HTML in headless Chromium; save report.png."
)
def report(
    result: str, out_dir: Path | None, results_dir: Path, overwrite: bool, screenshot: bool
) -> None:
    """Write RESULT's report: markdown, HTML, SVG/PNG charts, JSON and CSV of every run.

    RESULT is an id (`servelab results list`) or a results directory.
    """
    from servelab.report.files import report_result

    paths = report_result(
        result, results_root=results_dir, out_dir=out_dir, force=overwrite, screenshot=screenshot
    )
    for path in paths:
        out.print(str(path), highlight=False)


@cli.command("export")
@click.argument("result")
@click.option(
    "--variant",
    default="best",
    show_default=True,
    help="'best' (fastest without errors, significantly better than the baseline) or a name.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the files go (default: RESULT's directory/export).",
)
@_results_dir
@click.option(
    "--name",
    default="webapp",
    show_default=True,
    help="Deployment name: app user, socket group NAME-sock, units, /etc/NAME, /run/NAME.",
)
@click.option("--listen", default="80", show_default=True, help="nginx's listen address.")
@click.option("--overwrite", is_flag=True, help="Replace the exported files in a non-empty --out.")
@click.option(
    "--no-check", is_flag=True, help="Skip nginx -t and gunicorn --check-config (app not here)."
)
def export(result, variant, out_dir, results_dir, name, listen, overwrite, no_check) -> None:
    """Write the deployable configuration of RESULT's best (or --variant NAME) stack."""
    from servelab.export import export_result
    from servelab.report.base import load_result

    report_input, result_dir, label = load_result(result, results_dir)
    outcome = export_result(
        report_input,
        variant,
        out_dir or result_dir / "export",
        source=label,
        name=name,
        listen=listen,
        force=overwrite,
        check=not no_check,
    )
    out.print(f"[bold]{outcome.choice.name}[/bold]: {outcome.choice.reason}", highlight=False)
    for check in outcome.checks:
        out.print(f"checked: {check}", highlight=False)
    for path in outcome.paths:
        out.print(str(path), highlight=False)


@cli.command()
def doctor() -> None:
    """Check this machine: nginx, load drivers, somaxconn, open files, CPUs."""
    from servelab.host.doctor import print_checks, run_checks

    checks = run_checks()
    print_checks(out, checks)
    if any(c.status == "fail" for c in checks):
        sys.exit(1)


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


def main() -> None:
    """Entry point: user errors are one line and an exit code, never a traceback."""
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        cli.main(standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        # click turns Ctrl-C (and our SIGTERM) into Abort; context managers have stopped
        # every process by the time it gets here.
        console.print("servelab: interrupted; every process it started was stopped")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except ServelabError as exc:
        # escape: a message naming a TOML table ("[database]") is text, not rich markup.
        console.print(
            f"[bold red]servelab: error:[/bold red] {escape(exc.one_line())}", highlight=False
        )
        if exc.detail:
            console.print(exc.detail, highlight=False, markup=False)
        sys.exit(exc.exit_code)
