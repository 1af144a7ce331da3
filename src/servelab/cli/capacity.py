"""`servelab capacity`: the largest arrival rate a stack holds under an SLO, with an
interval (servelab.capacity)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from servelab.cli.how_to_run import run_options
from servelab.cli.options import console, out
from servelab.cli.replay import replay_options
from servelab.cli.user_app import app_options
from servelab.config.load import ReplaySpec
from servelab.config.run import RunOptions, UserApp
from servelab.errors import SpecError
from servelab.registry import DEFAULT_SERVER, standalone_servers

# Measuring options a capacity search has no use for: it sets its own order and stopping.
NOT_FOR_CAPACITY = {
    "order": "--order", "order_seed": "--order-seed", "slices": "--slices",
    "side_by_side": "--side-by-side", "precision_pct": "--precision",
    "min_effect_pct": "--min-effect", "profile": "--profile",
}  # fmt: skip


def app_name(ref: str) -> str:
    """A short name for an app: its top-level package ("shop.wsgi:app" -> "shop"), or a
    built-in app's name."""
    module = ref.partition(":")[0].split(".")[0]
    return re.sub(r"[^A-Za-z0-9_-]+", "-", module).strip("-") or "app"


@click.command()
@click.argument("file", required=False, type=click.Path(path_type=Path))
@click.option(
    "--slo", default="p99<100ms,errors<0.1%", show_default=True,
    help="The objective: latency bounds (p50, p90, p95, p99, p999, mean; us, ms or s) and "
    "an error ratio, comma-separated.",
)
@click.option("--start", type=float, help="First rate [req/s] (default: half the probed "
              "throughput).")
@click.option("--max-rate", type=float, help="Highest rate tried (default: twice the probed "
              "throughput).")
@click.option("--min-rate", type=float, default=1.0, show_default=True,
              help="Lowest rate tried.")
@click.option("--trial-seconds", type=float, default=5.0, show_default=True,
              help="Each trial's schedule, at its fixed rate.")
@click.option("--half-width", type=float, default=5.0, show_default=True,
              help="Stop once the interval is within +- this many % of the capacity.")
@click.option("--max-trials", type=int, default=24, show_default=True,
              help="Trials per variant at most.")
@click.option("--confidence", type=float, default=0.90, show_default=True,
              help="Of the interval.")
@click.option("--hold", type=float, default=0.9, show_default=True,
              help="The planning figure: the rate held in this share of trials (0.9: in 9 "
              "of 10), given with the rate held in half of them (docs/capacity.md).")
@click.option("--connections", type=int, default=1000, show_default=True,
              help="Connections the driver may open to keep the schedule.")
@click.option("--one-start", is_flag=True, help="Every trial on one start of the stack "
              "(faster; that start's capacity). Default: each trial on a fresh start, whose "
              "differences the interval then carries.")
@click.option("--machine-wait", type=float, default=60.0, show_default=True,
              help="Seconds a start may wait while the machine itself runs slow (a fixed "
              "CPU loop on the stack's CPU below 85 % of its usual speed); 0: never wait.")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Per request [s].")
@click.option(
    "--driver", default=None, help="The load driver: oha (default), or locust (its built-in "
    "request scenario, on this machine or workers on others: --expect-workers).",
)
@click.option("--sleep", type=float, help="The built-in sleepy app: seconds per request "
              "(default 0.01).")
@click.option("--server", type=click.Choice(standalone_servers()), default=DEFAULT_SERVER,
              show_default=True, help="The app server (behind nginx), without FILE.")
@click.option("--worker-class", type=click.Choice(["sync", "gthread", "uvicorn"]))
@click.option("--workers", type=int, default=2, show_default=True)
@click.option("--transport", type=click.Choice(["tcp", "unix"]), default="unix",
              show_default=True)
@app_options
@replay_options
@run_options
def capacity(
    file: Path | None,
    slo: str,
    start: float | None,
    max_rate: float | None,
    min_rate: float,
    trial_seconds: float,
    half_width: float,
    max_trials: int,
    confidence: float,
    hold: float,
    connections: int,
    one_start: bool,
    machine_wait: float,
    timeout: float,
    driver: str | None,
    sleep: float | None,
    user: UserApp,
    replay: ReplaySpec | None,
    run: RunOptions,
    **stack: Any,
) -> None:
    """How many requests per second each stack holds while the SLO holds, with an
    interval: fixed-rate trials (open model, latency from each request's intended send
    time), placed by a search made for noise. Without FILE: one stack, the built-in sleepy
    app or --app; with FILE: each of the experiment's variants, its first workload's
    request. With --replay LOG, how many times the log's traffic each holds (the
    headroom): its speed is searched instead of a rate (--start and --max-rate are
    speeds then). Each variant's search answers within --budget (5 minutes unless
    given), with what its trials say by then."""
    from servelab import api
    from servelab.capacity import CapacityPlan, capacity_experiment, capacity_of_file, parse_slo
    from servelab.capacity.plan import DEFAULT_BUDGET_S
    from servelab.config.experiment import build_experiment
    from servelab.measuring.ramp import stack_dict

    given = [flag for name, flag in NOT_FOR_CAPACITY.items() if getattr(run, name)]
    if given:
        raise SpecError(
            f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to a "
            "capacity search (it sets its own trials)",
            "drop them; --max-trials and --half-width bound the search",
        )
    plan = CapacityPlan(
        slo=parse_slo(slo), start_rate=start, max_rate=max_rate, min_rate=min_rate,
        trial_s=trial_seconds, half_width=half_width / 100, max_trials=max_trials,
        confidence=confidence, connections=connections, timeout_s=timeout,
        fresh_starts=not one_start, machine_wait_s=machine_wait, hold=hold,
        budget_s=run.budget_s or DEFAULT_BUDGET_S,
    )
    plan.check()  # before anything starts
    run = replace(run, budget_s=None)  # the search's own, not a stopping rule's
    from servelab.registry import scheduling_drivers

    if driver is not None and driver not in scheduling_drivers():
        raise SpecError(
            f"--driver {driver} cannot send at a fixed rate and keep each request's "
            "intended send time",
            f"use one of {', '.join(scheduling_drivers())}",
        )
    if stack["workers"] < 1:
        raise SpecError(f"--workers must be 1 or more, got {stack['workers']}", "e.g. 2")
    if file is not None:
        experiment = capacity_of_file(file, driver)
    else:
        app_ref = "sleepy"
        built = stack_dict(
            app_ref, sleep, stack["server"], stack["worker_class"], stack["workers"],
            stack["transport"],
        )
        # Named after what is measured: the user's app (or the sleepy one), its server
        # and transport, as the answer line and the result directory show it.
        name = app_name(user.app.ref if user.app is not None else app_ref)
        built["name"] = f"{name}-{stack['server']}-{stack['transport']}"
        experiment = build_experiment(  # its plug-ins' rules checked once, by api.prepare
            capacity_experiment(name, [built], {"method": "GET", "path": "/"}, driver),
            source="capacity",
        )
    api.capacity(experiment, plan, run, replace(user, replay=replay), console=console, out=out)
