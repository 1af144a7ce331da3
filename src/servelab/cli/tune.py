"""``servelab tune``: the best configuration under an objective (see servelab.tune)."""

from __future__ import annotations

import io
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import click
from rich.console import Console

from servelab.cli.how_to_run import run_options
from servelab.cli.options import console, out, parse_int_list
from servelab.cli.user_app import app_options
from servelab.config.run import RunOptions, UserApp, parse_duration
from servelab.config.stack import ServerSpec
from servelab.errors import SpecError
from servelab.registry import standalone_servers
from servelab.tune.objective import OBJECTIVES

WORKER_CLASS_NAMES = get_args(ServerSpec.model_fields["worker_class"].annotation)
# The measuring time a tune spends unless told (--budget, or budget in the [tune] table).
DEFAULT_BUDGET = "15m"
# What a [tune] table may hold besides its [[tune.space]] entries.
TABLE_KEYS = (
    "objective", "rate", "p99_ms", "max_error_ratio", "max_memory_mib", "slo", "concurrency",
    "duration_s", "max_rounds", "tie_pct", "budget", "endpoint", "space",
)


def read_tune_table(path: Path) -> dict[str, Any]:
    """The [tune] table of a TOML file, its keys checked (SpecError naming the problem)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"space file {path} does not exist", "check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read {path}: {exc}", "give a UTF-8 TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path} is not valid TOML: {exc}", "fix the TOML syntax") from None
    table = data.get("tune")
    if not isinstance(table, dict):
        raise SpecError(
            f"{path} has no [tune] table", "write the space as [[tune.space]] entries"
        )
    unknown = sorted(set(table) - set(TABLE_KEYS))
    if unknown:
        raise SpecError(f"{path}: unknown key tune.{unknown[0]}",
                        f"a [tune] table has: {', '.join(TABLE_KEYS)}")
    return table


def _choices(text: str | None, allowed: tuple[str, ...], what: str) -> tuple[str, ...] | None:
    if text is None:
        return None
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise SpecError(f"unknown {what} {bad[0] if bad else text!r}",
                        f"choose among {', '.join(allowed)} (comma-separated)")
    return values


def _zero_or_more(text: str | None, what: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise SpecError(f"invalid {what} list {text!r}", "write e.g. '0,8'") from None
    if any(v < 0 for v in values):
        raise SpecError(f"{what} must be 0 or more, got {text!r}", "write e.g. '0,8'")
    return values


@click.command()
@click.option("--space", "space_file", type=click.Path(path_type=Path),
              help="A TOML file whose [tune] table gives the space ([[tune.space]] entries) "
              "and any of the options below.")
@click.option("--servers", help="App servers to try, e.g. 'gunicorn,uvicorn,granian' "
              "(default: those installed that serve the app).")
@click.option("--workers", help="Worker counts, e.g. '1-5' (default 1 to 2 x stack CPUs + 1).")
@click.option("--threads", help="Threads per worker for gthread (and granian), e.g. '2,4'.")
@click.option("--worker-class", help="gunicorn worker classes: sync, gthread, uvicorn "
              "(default: sync,gthread for WSGI apps, uvicorn for ASGI).")
@click.option("--transport", help="nginx to the app: 'tcp,unix' (default both).")
@click.option("--upstream-keepalive", help="nginx's pooled upstream connections, e.g. '0,8'.")
@click.option("--backlog", help="Listen backlogs, e.g. '64,2048' (default: not varied).")
@click.option("--objective", type=click.Choice(OBJECTIVES), help="What to optimise "
              "(default max-rps).")
@click.option("--rate", type=float, help="Arrival rate [req/s]: min-p99 and min-memory "
              "measure at this fixed rate (open model).")
@click.option("--p99-ms", type=float, help="Limit: p99 latency at most this.")
@click.option("--max-error-ratio", type=float, help="Limit: at most this share of requests "
              "fail (default 0.01).")
@click.option("--max-memory", type=float, help="Limit: stack memory (peak RSS) in MiB.")
@click.option("--slo", help="With --objective max-capacity: the SLO each finalist's "
              "capacity is searched under, as `servelab capacity` takes it "
              "('p99<100ms,errors<0.1%').")
@click.option("--endpoint", help="Built-in fastapi app: which seed endpoint (default "
              "async-small).")
@click.option("-c", "--concurrency", type=int, help="Concurrent clients (closed model; "
              "default 50).")
@click.option("-d", "--duration", type=float, help="Seconds each candidate is measured per "
              "round, after a 1 s warm-up (default 2).")
@click.option("--max-rounds", type=int, help="Most rounds of fresh starts (default 10).")
@click.option("--tie", "tie_pct", type=float, help="The race ends once the candidates left "
              "are within this many percent of the leader (default 5).")
@app_options
@run_options
def tune(space_file: Path | None, user: UserApp, run: RunOptions, **given: Any) -> None:
    """Find the best configuration of a space for your app: candidates raced round by
    round, each dropped once significantly worse than the leader, until one is left, the
    rest tie (--tie) or --budget (default 15 min) is spent. Writes tune.md, tune.json and
    tune.png beside the result; `servelab export RESULT` deploys the recommended one.

    With --profile the race is measured as without it; once it is over, the finalists
    (the recommended candidate and up to two runners-up) get 3 more starts each with
    py-spy, and tune.md ends with why the recommended one is ahead (CPU per request by
    part and function, 95 % intervals), with tune-flame.svg beside it; this profiling is
    not counted in --budget."""
    from servelab.tune.build import build_tune

    for label, value in (("--precision", run.precision_pct), ("--slices", run.slices),
                         ("--side-by-side", run.side_by_side), ("--order", run.order),
                         ("--min-effect", run.min_effect_pct)):
        if value is not None:
            raise SpecError(f"{label} does not apply to servelab tune: the race decides how "
                            "much each candidate is measured", f"leave out {label}")
    table = read_tune_table(space_file) if space_file is not None else {}
    budget = run.budget_s
    if budget is None:
        budget = parse_duration(str(table.get("budget", DEFAULT_BUDGET)))
    spec, notes = build_tune(
        table, source=str(space_file or "the command line"), app=user.app,
        request_given=user.request_given, budget_s=budget,
        workers=parse_int_list(given["workers"], "workers"),
        threads=parse_int_list(given["threads"], "threads"),
        servers=_choices(given["servers"], standalone_servers(), "app server"),
        worker_classes=_choices(
            given["worker_class"], WORKER_CLASS_NAMES, "gunicorn worker class"
        ),
        transports=_choices(given["transport"], ("tcp", "unix"), "transport"),
        upstream_keepalive=_zero_or_more(given["upstream_keepalive"], "--upstream-keepalive"),
        backlogs=parse_int_list(given["backlog"], "backlog"),
        objective=given["objective"], rate=given["rate"], p99_ms=given["p99_ms"],
        max_error_ratio=given["max_error_ratio"], max_memory_mib=given["max_memory"],
        slo=given["slo"], endpoint=given["endpoint"], concurrency=given["concurrency"],
        duration_s=given["duration"], max_rounds=given["max_rounds"], tie_pct=given["tie_pct"],
        stack_cpus=run.stack_cpus,
    )
    for note in notes:
        console.print(f"servelab: {note}", highlight=False)
    from servelab.tune.run import run_tune

    options = replace(run, budget_s=None)
    outcome = run_tune(spec, options, replace(user, replace_workloads=True), console=console,
                       quiet=Console(file=io.StringIO()),
                       say=lambda note: console.print(f"servelab: {note}", highlight=False))
    out.print(outcome.markdown if options.detail else outcome.summary, markup=False,
              highlight=False)
    out.print(f"result {outcome.label}; ranking: {outcome.path}", highlight=False)
    if outcome.flame is not None:
        out.print(f"differential flame graph: {outcome.flame}", highlight=False)
