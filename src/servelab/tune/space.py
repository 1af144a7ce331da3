"""The search space of ``servelab tune``: sub-grids of stacks, from a TOML ``[tune]``
table or from the command line's knob lists, and its defaults. Pure.

A space is a list of sub-grids. Each names a base (server and front tables, merged
onto the tune's baseline stack) and a grid of dotted knobs to lists of values, as an
experiment file's ``[grid]`` does; the candidates are every sub-grid's combinations.
Sub-grids let a knob apply to one server only (gunicorn's worker class and threads,
upstream keepalive only where a front pools connections)::

    [[tune.space]]
    server = { kind = "gunicorn", worker_class = "uvicorn" }
    grid = { "server.workers" = [1, 2, 3], "proxy.transport" = ["tcp", "unix"] }

    [[tune.space]]
    server = { kind = "granian" }
    grid = { "server.workers" = [1, 2, 3] }
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from servelab.config.building import deep_merge, expand_grid, format_value
from servelab.errors import SpecError

# More candidates than this would take hours even raced: the user narrows the space.
MAX_CANDIDATES = 200
# Knobs a sub-grid's grid may vary (dotted, as in an experiment file's [grid]).
GRID_KNOBS = (
    "server.workers",
    "server.threads",
    "server.worker_class",
    "server.backlog",
    "server.blocking_threads",
    "server.keepalive_s",
    "proxy.transport",
    "proxy.upstream_keepalive",
    "proxy.kind",
)
# Short names of the knobs in candidate names: "gunicorn-uvicorn w=2 unix ka=8".
SHORT = {
    "server.workers": "w",
    "server.threads": "t",
    "server.worker_class": "",
    "server.backlog": "backlog",
    "server.blocking_threads": "bt",
    "server.keepalive_s": "keepalive",
    "proxy.transport": "",
    "proxy.upstream_keepalive": "ka",
    "proxy.kind": "",
}
# Worker classes tried by default for a server that has them (gunicorn's), by the
# app's interface: its ASGI worker (uvicorn-worker), or sync and gthread.
WORKER_CLASSES = {"asgi": ("uvicorn",), "wsgi": ("sync", "gthread")}
# Front-less servers and servers inside their front pool no upstream connections.
THREADED_CLASSES = ("gthread",)


@dataclass(frozen=True)
class SubGrid:
    """One part of the space: stack overrides, and the knobs varied over them."""

    base: Mapping[str, Any]  # {"server": {...}, "proxy": {...}}
    grid: Mapping[str, Sequence[Any]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """'gunicorn-uvicorn', 'granian', 'uwsgi via apache': what the base fixes."""
        from servelab.registry import DEFAULT_FRONT, DEFAULT_SERVER

        server = dict(self.base.get("server", {}))
        words = [str(server.get("kind", DEFAULT_SERVER))]
        if "worker_class" in server:
            words[0] += f"-{server['worker_class']}"
        proxy = dict(self.base.get("proxy", {}))
        if "kind" in proxy and proxy["kind"] != DEFAULT_FRONT:
            words.append(f"via {proxy['kind']}")
        return " ".join(words)


@dataclass(frozen=True)
class Candidate:
    """One configuration the tune may pick: its name and its stack table."""

    name: str
    stack: Mapping[str, Any]  # a stack dict (name, server, proxy), merged onto the baseline


def candidate_name(label: str, knobs: Mapping[str, Any]) -> str:
    """'gunicorn-uvicorn w=2 unix ka=8' from the sub-grid's label and its knob values."""
    parts = [label]
    for key, value in knobs.items():
        short = SHORT.get(key, key.rsplit(".", 1)[-1])
        parts.append(f"{short}={format_value(value)}" if short else format_value(value))
    return " ".join(parts)


def expand_space(baseline: Mapping[str, Any], space: Sequence[SubGrid]) -> list[Candidate]:
    """Every candidate of ``space``, in order, as stacks merged onto ``baseline`` (a stack
    dict with the app); names are unique or this is a SpecError."""
    candidates: list[Candidate] = []
    for sub in space:
        base = deep_merge(dict(baseline), {k: dict(v) for k, v in sub.base.items()})
        if not sub.grid:
            candidates.append(Candidate(sub.label, {**base, "name": sub.label}))
            continue
        for stack in expand_grid(base, {k: list(v) for k, v in sub.grid.items()}):
            knobs = {key: _dotted(stack, key) for key in sub.grid}
            name = candidate_name(sub.label, knobs)
            candidates.append(Candidate(name, {**stack, "name": name}))
    names = [c.name for c in candidates]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SpecError(
            f"the tune space has the candidate {repeated[0]!r} more than once",
            "give each [[tune.space]] entry a different server or different knob values",
        )
    if not candidates:
        raise SpecError("the tune space is empty", "give at least one [[tune.space]] entry")
    if len(candidates) > MAX_CANDIDATES:
        raise SpecError(
            f"the tune space has {len(candidates)} candidates; at most {MAX_CANDIDATES} are "
            "raced",
            "narrow it: fewer worker counts, servers or knobs",
        )
    return candidates


def _dotted(data: Mapping[str, Any], key: str) -> Any:
    for part in key.split("."):
        data = data[part]
    return data


def space_from_table(table: Any, source: str) -> list[SubGrid]:
    """The ``[[tune.space]]`` entries of a TOML file, checked (SpecError naming the entry)."""
    if not isinstance(table, list) or not table:
        raise SpecError(
            f"{source}: 'tune.space' must be a non-empty array of tables",
            "write each part of the space as [[tune.space]] with server = { kind = ... }",
        )
    space = []
    for index, entry in enumerate(table, start=1):
        where = f"{source}: tune.space entry {index}"
        if not isinstance(entry, dict):
            raise SpecError(f"{where} is not a table", "write it as [[tune.space]]")
        unknown = sorted(set(entry) - {"server", "proxy", "grid"})
        if unknown:
            raise SpecError(
                f"{where}: unknown key {unknown[0]!r}", "an entry has server, proxy and grid"
            )
        base = {k: entry[k] for k in ("server", "proxy") if k in entry}
        for key, value in base.items():
            if not isinstance(value, dict):
                raise SpecError(f"{where}: {key} must be a table", f"e.g. {key} = {{ kind = ... }}")
        grid = entry.get("grid", {})
        if not isinstance(grid, dict):
            raise SpecError(
                f"{where}: grid must be a table", "e.g. grid = { 'server.workers' = [1, 2] }"
            )
        for key, values in grid.items():
            if key not in GRID_KNOBS:
                raise SpecError(
                    f"{where}: grid knob {key!r} is not tunable",
                    f"choose among {', '.join(GRID_KNOBS)}",
                )
            if not isinstance(values, list) or not values:
                raise SpecError(
                    f"{where}: grid knob {key!r} needs a non-empty list", "e.g. [1, 2, 3]"
                )
        space.append(SubGrid(base, grid))
    return space


@dataclass(frozen=True)
class KnobLists:
    """The knob lists given on the command line (None: the default for the app)."""

    servers: tuple[str, ...] | None = None
    workers: tuple[int, ...] | None = None
    threads: tuple[int, ...] | None = None
    worker_classes: tuple[str, ...] | None = None
    transports: tuple[str, ...] | None = None
    upstream_keepalive: tuple[int, ...] | None = None
    backlogs: tuple[int, ...] | None = None


def default_workers(stack_cpus: int) -> tuple[int, ...]:
    """1 up to gunicorn's rule of thumb, 2 x CPUs + 1, on the stack's CPUs (at most 9)."""
    return tuple(range(1, min(2 * stack_cpus + 1, 9) + 1))


def space_from_knobs(
    knobs: KnobLists,
    *,
    interface: str,
    installed: Sequence[str],
    stack_cpus: int,
    pooling_front: bool = True,
) -> list[SubGrid]:
    """Sub-grids from the command line's lists, defaults from the app and the machine.

    ``interface``: the app's ("asgi"/"wsgi"): WSGI gets gunicorn sync and gthread, ASGI
    gunicorn's uvicorn worker and uvicorn; granian, hypercorn and uWSGI join where
    installed (``installed``) and they serve the interface. Threads only vary for
    gthread; upstream keepalive only where the front pools connections."""
    servers = knobs.servers or default_servers(interface, installed)
    workers = knobs.workers or default_workers(stack_cpus)
    transports = knobs.transports or ("tcp", "unix")
    keepalive = knobs.upstream_keepalive or ((0, 8) if pooling_front else (0,))
    space = []
    for server in servers:
        classes: tuple[str | None, ...] = (None,)
        if _has_knob(server, "worker_class"):
            classes = knobs.worker_classes or WORKER_CLASSES[interface]
        for worker_class in classes:
            base: dict[str, Any] = {"server": {"kind": server}}
            if worker_class is not None:
                base["server"]["worker_class"] = worker_class
            grid: dict[str, Sequence[Any]] = {"server.workers": workers}
            if worker_class in THREADED_CLASSES:
                grid["server.threads"] = knobs.threads or (2, 4)
            elif worker_class is None and knobs.threads and _has_knob(server, "threads"):
                grid["server.threads"] = knobs.threads
            grid["proxy.transport"] = transports
            if len(keepalive) > 1 or keepalive != (0,):
                grid["proxy.upstream_keepalive"] = keepalive
            if knobs.backlogs:
                grid["server.backlog"] = knobs.backlogs
            space.append(SubGrid(base, grid))
    return space


def _has_knob(server: str, knob: str) -> bool:
    from servelab.plugins.server import get_server

    return knob in get_server(server).knobs


def default_servers(interface: str, installed: Sequence[str]) -> tuple[str, ...]:
    """The standalone servers (the registry's order) that serve ``interface`` and are
    installed."""
    from servelab.plugins.server import get_server
    from servelab.registry import standalone_servers

    return tuple(
        kind for kind in standalone_servers()
        if interface in get_server(kind).interfaces and kind in installed
    )
