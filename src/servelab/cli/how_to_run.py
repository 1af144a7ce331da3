"""How to run: the options of every measuring command (CPUs, results, order, slices,
stopping, the driver's own), turned into one ``RunOptions`` (``run_options``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from servelab.cli.options import results_option
from servelab.config.run import LOOPBACK, RunOptions, parse_duration
from servelab.errors import SpecError
from servelab.report.formats import EXPORT_FORMATS

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
    results_option("The results directory: servelab.db and one directory per experiment."),
    *(
        click.option(
            f"--export-{fmt}", f"export_{fmt}", type=click.Path(path_type=Path), default=None,
            help=f"Also keep FILE up to date as {fmt.upper() if fmt != 'markdown' else 'Markdown'}"
            " (rewritten after every run).",
        )
        for fmt in EXPORT_FORMATS
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
        "--allow-beyond-machine",
        is_flag=True,
        help="Run even what this machine cannot hold (by servelab's estimate: the workers' "
        "memory, the connections' open files, threads per worker, workers per CPU).",
    ),
    click.option(
        "--order",
        type=click.Choice(["interleaved", "random"]),
        default=None,
        help="Run order of the variants in each round (default interleaved).",
    ),
    click.option(
        "--order-seed", type=int, default=None, help="Seed of the random order (--order random)."
    ),
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
        help="Measure each round's stacks at the same time (the machine's drift cancels), "
        "or in turns, one stack at a time. Default: the experiment's own; quick goes side by "
        "side only where each stack gets CPUs of its own.",
    ),
    click.option(
        "--switch/--no-switch",
        "switching",
        default=None,
        help="In turns, drive each round's stacks by a load driver each, kept running and "
        "switched between them every 0.5 s (oha; endpoints whose requests in flight drain "
        "within 0.15 s), instead of a driver started anew for every slice. Default: the "
        "experiment's own (on unless its file says switching = false; off with --profile).",
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
        "each study has a default; capacity: each variant's search, 5m by default).",
    ),
    click.option(
        "--min-effect",
        "min_effect_pct",
        type=float,
        default=None,
        help="Smallest change in percent that counts; an interval entirely beyond ± it "
        "is a clear answer.",
    ),
    click.option(
        "--listen",
        default=None,
        help="IP address the stacks' fronts listen on (default 127.0.0.1). Anything that "
        "can reach it can send them requests while servelab runs: use a private network "
        "address, only for load workers on other machines.",
    ),
    click.option(
        "--access-log",
        is_flag=True,
        help="nginx logs every request's client address in each stack's own directory, and "
        "every run records its requests by client address (front_requests_by_client in "
        "runs.jsonl): to check that the load arrived from where it was sent. Off by "
        "default: logging costs nginx a write per request.",
    ),
    click.option(
        "--profile",
        is_flag=True,
        help="Sample the app server's processes (master and workers) with py-spy, every "
        "variant alike, while the same load drives the stack again right after each "
        "measured window (the figures stay unprofiled; measuring takes longer): every run "
        "of study, run and check; tune's finalists, in starts of their own after the race. "
        "The report says where the CPU per request went and what changed against the "
        "baseline (flame graphs in the HTML report).",
    ),
    # The Locust driver's own options (stored as the experiment's driver_options).
    click.option(
        "--locustfile",
        default=None,
        help="Your locustfile (unchanged; servelab passes --host), or a built-in scenario: "
        "'request' (the workload's request; default) or 'django' (the Django app's pages).",
    ),
    click.option(
        "--locust-user",
        "locust_users",
        multiple=True,
        help="User class of the locustfile to run (repeatable; default: all of them, or "
        "FastRequestUser of the built-in 'request'; RequestUser uses HttpUser).",
    ),
    click.option(
        "--locust-processes",
        type=int,
        default=None,
        help="Locust worker processes on this machine (Locust's --processes).",
    ),
    click.option(
        "--expect-workers",
        type=int,
        default=None,
        help="Locust workers on other machines the master waits for (it listens on "
        "--listen, port 5557).",
    ),
    click.option(
        "--expect-workers-timeout",
        default=None,
        help="How long the master waits for them, e.g. '60s' (default 60 s).",
    ),
]

# The options above that are the driver's own: CLI name -> driver_options key.
DRIVER_OPTION_KEYS = {
    "locustfile": "locustfile",
    "locust_users": "users",
    "locust_processes": "processes",
    "expect_workers": "expect_workers",
    "expect_workers_timeout": "workers_timeout_s",
}


def driver_options(given: dict) -> dict:
    """The driver options given on the command line (``--listen`` is where the master
    listens for remote workers too)."""
    options = {
        key: given[name]
        for name, key in DRIVER_OPTION_KEYS.items()
        if given[name] not in (None, ())
    }
    if "users" in options:
        options["users"] = tuple(options["users"])
    if "workers_timeout_s" in options:
        options["workers_timeout_s"] = parse_duration(options["workers_timeout_s"])
    if "expect_workers" in options and given["listen"] is not None:
        options["master_bind"] = given["listen"]
    return options


def check_listen(address: str) -> str:
    """``--listen``: an IP address of this machine (SpecError otherwise)."""
    import ipaddress
    import socket

    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise SpecError(
            f"--listen {address!r} is not an IP address", "give one, e.g. 10.0.0.5 or 127.0.0.1"
        ) from None
    if ip.is_unspecified:
        raise SpecError(
            f"--listen {address} would listen on every network of this machine",
            "give the one address the load workers reach (a private network's)",
        )
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError as exc:
            raise SpecError(
                f"--listen {address} is not an address of this machine ({exc.strerror})",
                "give one of its addresses (ip -brief address)",
            ) from None
    return address


def _verbose() -> bool:
    """servelab -v: the whole report on the terminal, not only its summary."""
    context = click.get_current_context(silent=True)
    return bool(context and context.find_root().params.get("verbose"))


def check_run_outputs(run: RunOptions) -> None:
    """Every path a measuring command writes (--results, --export-*) can be written: one
    line before anything starts, never a traceback after the measuring."""
    from servelab.report.exports import check_writable
    from servelab.results.outdir import check_writable_path

    check_writable_path(run.results_dir, "--results", directory=True)
    check_writable(dict(run.result_files))


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the measuring options to a command, handed to it as one ``run`` (RunOptions)."""
    names = ("stack_cpus", "driver_cpus", "no_pin", "stack_cpu_quota", "no_cpu_priority",
             "results_dir", "legacy_out", "resume", "allow_other_machine",
             "allow_beyond_machine", "order", "order_seed", "slices", "side_by_side",
             "switching", "precision_pct", "budget", "min_effect_pct", "listen", "access_log",
             "profile",
             *DRIVER_OPTION_KEYS, *(f"export_{fmt}" for fmt in EXPORT_FORMATS))

    @functools.wraps(func)
    def with_run_options(*args: Any, **kwargs: Any) -> Any:
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
            allow_beyond_machine=given["allow_beyond_machine"],
            order=given["order"],
            order_seed=given["order_seed"],
            slices=given["slices"],
            side_by_side=given["side_by_side"],
            switching=given["switching"],
            precision_pct=given["precision_pct"],
            budget_s=parse_duration(given["budget"]) if given["budget"] is not None else None,
            min_effect_pct=given["min_effect_pct"],
            result_files=tuple(
                (fmt, given[f"export_{fmt}"]) for fmt in EXPORT_FORMATS if given[f"export_{fmt}"]
            ),
            driver_options=driver_options(given),
            listen=check_listen(given["listen"]) if given["listen"] else LOOPBACK,
            detail=_verbose(),
            profile=given["profile"],
            access_log=given["access_log"],
        )
        check_run_outputs(run)
        return func(*args, run=run, **kwargs)

    for option in reversed(_run_options):
        with_run_options = option(with_run_options)
    return with_run_options


