"""A TuneSpec from a [tune] table and the command line (the command line wins), with
the defaults that depend on the app (WSGI or ASGI) and on what is installed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from servelab.config.load import RequestSpec
from servelab.config.stack import AppSpec
from servelab.errors import SpecError
from servelab.host.cpus import default_cpu_plan, parse_cpu_list
from servelab.tune.objective import Objective
from servelab.tune.race import RaceSettings
from servelab.tune.run import TuneSpec
from servelab.tune.space import KnobLists, space_from_knobs, space_from_table

DEFAULT_ENDPOINT = "async-small"


def installed_servers(python: str | None) -> tuple[str, ...]:
    """The standalone app servers whose main package ``python`` (None: servelab's) has."""
    from servelab.apps.interpreter import own_python, python_facts
    from servelab.plugins.server import get_server
    from servelab.registry import standalone_servers

    kinds = [k for k in standalone_servers() if get_server(k).packages]
    mains = tuple(get_server(k).packages[0] for k in kinds)
    facts = python_facts(python or str(own_python()), mains)
    return tuple(k for k, main in zip(kinds, mains, strict=True) if facts.packages.get(main))


def app_interface(app: AppSpec | None) -> tuple[str, AppSpec | None, list[str]]:
    """("asgi"|"wsgi", the app with its Python settled, notes said about it)."""
    if app is None:
        return "asgi", None, []  # the built-in FastAPI seed app
    from servelab.apps.interpreter import with_app_python
    from servelab.prepare.user_app import resolve_user_app

    settled, note = with_app_python(app)
    return resolve_user_app(settled).interface, settled, [note] if note else []


def _stack_cpu_count(stack_cpus: str | None) -> int:
    text = stack_cpus or default_cpu_plan().stack
    return len(parse_cpu_list(text)) if text else 1


def _pick(given: Any, table: Mapping[str, Any], key: str) -> Any:
    return given if given is not None else table.get(key)


def build_tune(
    table: Mapping[str, Any],
    *,
    source: str,
    app: AppSpec | None,
    request_given: bool,
    budget_s: float | None,
    workers: Sequence[int] | None = None,
    threads: Sequence[int] | None = None,
    servers: tuple[str, ...] | None = None,
    worker_classes: tuple[str, ...] | None = None,
    transports: Sequence[str] | None = None,
    upstream_keepalive: Sequence[int] | None = None,
    backlogs: Sequence[int] | None = None,
    objective: str | None = None,
    rate: float | None = None,
    p99_ms: float | None = None,
    max_error_ratio: float | None = None,
    max_memory_mib: float | None = None,
    slo: str | None = None,
    endpoint: str | None = None,
    concurrency: int | None = None,
    duration_s: float | None = None,
    max_rounds: int | None = None,
    tie_pct: float | None = None,
    stack_cpus: str | None = None,
) -> tuple[TuneSpec, list[str]]:
    """The tune to run, and notes to say (the app's Python, the space's size)."""
    from servelab.studies.seeds import SEED_ENDPOINTS, SEED_ITEM_BODY

    interface, settled, notes = app_interface(app)
    knob_given = any(
        v is not None for v in (workers, threads, servers, worker_classes, transports,
                                upstream_keepalive, backlogs)
    )
    if "space" in table and knob_given:
        raise SpecError(
            f"{source} gives the space ([[tune.space]]) and so do the knob options",
            "give the space in one place: the file's [[tune.space]] or --servers/--workers/...",
        )
    if "space" in table:
        space = space_from_table(table["space"], source)
    else:
        installed = installed_servers(str(settled.python) if settled and settled.python else None)
        missing = [s for s in servers or () if s not in installed]
        if missing:
            raise SpecError(
                f"app server {missing[0]!r} is not installed in the app's Python; "
                f"installed: {', '.join(installed)}",
                "leave it out of --servers, or install it into the app's Python",
            )
        space = space_from_knobs(
            KnobLists(servers, tuple(workers) if workers else None,
                      tuple(threads) if threads else None, worker_classes,
                      tuple(transports) if transports else None,
                      tuple(upstream_keepalive) if upstream_keepalive is not None else None,
                      tuple(backlogs) if backlogs else None),
            interface=interface, installed=installed, stack_cpus=_stack_cpu_count(stack_cpus),
        )
    goal = Objective(
        kind=_pick(objective, table, "objective") or "max-rps",
        rate=_pick(rate, table, "rate"),
        p99_ms=_pick(p99_ms, table, "p99_ms"),
        max_error_ratio=_or(_pick(max_error_ratio, table, "max_error_ratio"), 0.01),
        max_memory_mib=_pick(max_memory_mib, table, "max_memory_mib"),
        slo=_pick(slo, table, "slo"),
    )
    settings = RaceSettings(
        max_rounds=_positive(_pick(max_rounds, table, "max_rounds"), 10, "--max-rounds", int),
        tie_pct=_positive(_pick(tie_pct, table, "tie_pct"), 5.0, "--tie", float),
    )
    if app is None and request_given:
        raise SpecError("--method, --path, --header, --body-file and --expect-status need --app",
                        "pass --app package.module:attr (or --endpoint for the built-in app)")
    request = RequestSpec()
    point = _pick(endpoint, table, "endpoint")
    if app is None:
        point = point or DEFAULT_ENDPOINT
        if point not in SEED_ENDPOINTS:
            raise SpecError(f"unknown endpoint {point!r}",
                            f"choose among {', '.join(SEED_ENDPOINTS)}")
        request = RequestSpec(method="POST", path=SEED_ENDPOINTS[point], body=SEED_ITEM_BODY)
    elif point is not None:
        raise SpecError("--endpoint picks a route of the built-in app",
                        "with --app, give the request with --path/--method/--body-file")
    spec = TuneSpec(
        space=tuple(space),
        objective=goal,
        settings=settings,
        request=request,
        concurrency=_positive(_pick(concurrency, table, "concurrency"), 50, "--concurrency", int),
        duration_s=_positive(_pick(duration_s, table, "duration_s"), 2.0, "--duration", float),
        budget_s=budget_s,
    )
    count = len(spec.candidates())
    notes.append(f"{count} candidates; objective: {goal.describe()}")
    return spec, notes


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _positive(value: Any, default: Any, label: str, kind: type) -> Any:
    if value is None:
        return default
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise SpecError(f"{label} must be a number, got {value!r}", f"pass {label} > 0") from None
    if not number > 0:
        raise SpecError(f"{label} must be positive, got {value!r}", f"pass {label} > 0")
    return number
