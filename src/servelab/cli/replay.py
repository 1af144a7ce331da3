"""``--replay LOG``: an access log replayed in place of the workloads (study, run, check,
capacity), turned into one ``ReplaySpec`` handed to the command as ``replay``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from servelab.config.load import ReplaySpec
from servelab.errors import SpecError

_replay_options = [
    click.option(
        "--replay", "replay_logs", multiple=True, type=click.Path(path_type=Path),
        help="Replay this access log (gzip or plain; repeat for several files read as one) "
        "in place of the workloads: each request at its logged time, latency from that "
        "time (docs/traffic.md).",
    ),
    click.option("--log-format", default="auto", show_default=True,
                 help="With --replay: auto (combined, common or JSON lines), combined, "
                 "common, json, your nginx log_format or Apache LogFormat string, or "
                 "FILE:NAME, the format of that name in your server's configuration.",),
    click.option("--log-field", "log_fields", multiple=True,
                 help="With --log-format json: NAME=KEY for time, method, path, status."),
    click.option("--window", help="With --replay: seconds from the log's first request, "
                 "START:END (e.g. 0:300)."),
    click.option("--speed", type=float, help="With --replay: the log's times divided by this "
                 "(2: twice its traffic). Default 1."),
    click.option("--route", "routes", multiple=True,
                 help="With --replay: keep routes or paths matching this pattern "
                 "(/items/*, /items/{id}); repeatable."),
    click.option("--replay-method", "methods", multiple=True,
                 help="With --replay: keep this method only; repeatable."),
    click.option("--status", "statuses", multiple=True,
                 help="With --replay: keep requests logged with this status or class (2xx)."),
    click.option("--route-body", "route_bodies", multiple=True,
                 help="With --replay: ROUTE=FILE, the body a route's POST/PUT/PATCH requests "
                 "carry (access logs keep none; without one they are left out)."),
    click.option("--anonymise", is_flag=True,
                 help="With --replay: replace query values by stable hashes."),
]


def _window(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    start, _, end = text.partition(":")
    try:
        return float(start or 0), float(end)
    except ValueError:
        raise SpecError(f"cannot read --window {text!r}", "write START:END in seconds, "
                        "e.g. --window 0:300") from None


def _pairs(values: tuple[str, ...], option: str, example: str) -> dict[str, str]:
    found = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise SpecError(f"cannot read {option} {value!r}", f"write e.g. {option} {example}")
        found[name.strip()] = rest.strip()
    return found


def replay_spec(
    logs: tuple[Path, ...], log_format: str, log_fields: tuple[str, ...], window: str | None,
    speed: float | None, routes: tuple[str, ...], methods: tuple[str, ...],
    statuses: tuple[str, ...], route_bodies: tuple[str, ...], anonymise: bool,
) -> ReplaySpec | None:
    """The options as one ReplaySpec; None without --replay (and then no other replay
    option may be given)."""
    if not logs:
        given = [name for name, value in (
            ("--window", window), ("--speed", speed), ("--route", routes),
            ("--replay-method", methods), ("--status", statuses),
            ("--route-body", route_bodies), ("--log-field", log_fields),
            ("--anonymise", anonymise or None),
        ) if value]
        if given or log_format != "auto":
            raise SpecError(f"{given[0] if given else '--log-format'} needs --replay",
                            "pass --replay access.log")
        return None
    bodies = {}
    for route, file in _pairs(route_bodies, "--route-body", "/items/=item.json").items():
        try:
            bodies[route] = {"body": Path(file).read_text()}
        except OSError as exc:
            raise SpecError(f"cannot read the body file {file} ({exc.strerror})",
                            "check the path in --route-body") from None
    try:
        return ReplaySpec.model_validate({
            # Relative to where the command runs, whatever the experiment file's directory.
            "log": tuple(str(p.expanduser().absolute()) for p in logs), "format": log_format,
            "fields": _pairs(log_fields, "--log-field", "time=ts"),
            "window": _window(window), "speed": 1.0 if speed is None else speed,
            "routes": routes, "methods": tuple(m.upper() for m in methods),
            "statuses": statuses, "bodies": bodies, "anonymise": anonymise,
        })
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise SpecError(f"replay option {where}: {error['msg']}",
                        "see `servelab study --help`") from None


def replay_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the --replay options to a command, handed to it as one ``replay`` (a
    ReplaySpec, or None)."""

    @functools.wraps(func)
    def with_replay(
        *args: Any, replay_logs: tuple[Path, ...], log_format: str,
        log_fields: tuple[str, ...], window: str | None, speed: float | None,
        routes: tuple[str, ...], methods: tuple[str, ...], statuses: tuple[str, ...],
        route_bodies: tuple[str, ...], anonymise: bool, **kwargs: Any,
    ) -> Any:
        replay = replay_spec(
            replay_logs, log_format, log_fields, window, speed, routes, methods, statuses,
            route_bodies, anonymise,
        )
        return func(*args, replay=replay, **kwargs)

    for option in reversed(_replay_options):
        with_replay = option(with_replay)
    return with_replay
