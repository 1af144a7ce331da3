"""Every plug-in by name: "module:Class" strings imported when first used, as uvicorn's
``HTTP_PROTOCOLS`` and ``LOOP_SETUPS`` (in its config, below the implementations).

The tables of app servers, fronts and load drivers live here, on the floor below the
model (``servelab.config`` names their kinds and defaults, and asks what a driver can do),
so that servers/, fronts/ and load/ hold plug-ins only. Adding a plug-in is one module and
one line in its table.

What a plug-in is lives one floor up, in ``servelab.plugins``: the bases (``AppServer``,
``Front``, ``LoadDriver``) take the model's specs, so they stand above it, and each hands
out its own kind typed and checked (``plugins.server.get_server(kind) -> AppServer``).
This module names no base.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import Any

from servelab.errors import SpecError


class Registry:
    def __init__(self, what: str, entries: dict[str, str]) -> None:
        self.what = what  # names the plug-in in messages: "load driver"
        self.entries = dict(entries)

    @property
    def names(self) -> tuple[str, ...]:
        """In registration order; the first is the default."""
        return tuple(self.entries)

    def cls(self, name: str) -> type[Any]:
        """The class registered as ``name``; SpecError naming the choices if none is."""
        if name not in self.entries:
            raise SpecError(
                f"unknown {self.what} {name!r}", f"choose one of {', '.join(self.names)}"
            )
        return imported(self.entries[name])

    def get(self, name: str) -> Any:
        """The one shared instance of ``name`` (plug-ins without state)."""
        return _instance(self.entries[name]) if name in self.entries else self.cls(name)()

    def where(self, test: Callable[[Any], object]) -> tuple[str, ...]:
        """The names whose shared instance passes ``test``, in registration order."""
        return tuple(name for name in self.names if test(self.get(name)))


@cache
def imported(target: str) -> Any:
    """What "module:name" names, its module imported on first use."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@cache
def _instance(target: str) -> Any:
    return imported(target)()


# -- app servers (servers/) ----------------------------------------------------------------

SERVERS = Registry(
    "app server",
    {
        "gunicorn": "servelab.servers.gunicorn:Gunicorn",
        "uvicorn": "servelab.servers.uvicorn:Uvicorn",
        "granian": "servelab.servers.granian:Granian",
        "hypercorn": "servelab.servers.hypercorn:Hypercorn",
        "uwsgi": "servelab.servers.uwsgi:UWsgi",
        "mod_wsgi": "servelab.servers.mod_wsgi:ModWsgi",
    },
)
SERVER_KINDS = SERVERS.names
DEFAULT_SERVER = SERVER_KINDS[0]


def standalone_servers() -> tuple[str, ...]:
    """The servers that run as their own processes (not inside a front)."""
    return SERVERS.where(lambda server: server.inside_front is None)


# -- fronts (fronts/) ----------------------------------------------------------------------

FRONTS = Registry(
    "front",
    {
        "none": "servelab.fronts.none:NoFront",
        "nginx": "servelab.fronts.nginx:Nginx",
        "apache": "servelab.fronts.apache:Apache",
    },
)
FRONT_KINDS = FRONTS.names
NO_FRONT = "none"
DEFAULT_FRONT = "nginx"
# The fronts that run a process of their own (and have a version to record).
PROCESS_FRONTS = tuple(kind for kind in FRONT_KINDS if kind != NO_FRONT)


# -- load drivers (load/) ------------------------------------------------------------------

DRIVERS = Registry(
    "load driver",
    {
        "oha": "servelab.load.oha:OhaDriver",
        "ab": "servelab.load.ab:AbDriver",
        "wrk": "servelab.load.wrk:WrkDriver",
        "locust": "servelab.load.locust:LocustDriver",
        "vegeta": "servelab.load.vegeta:VegetaDriver",
    },
)
DRIVER_NAMES = DRIVERS.names
DEFAULT_DRIVER = DRIVER_NAMES[0]
# What sends a replay workload (an access log's requests at their own times).
REPLAY_DRIVER = "vegeta"


def scheduling_drivers() -> tuple[str, ...]:
    """The drivers that send at a fixed rate and keep each request's intended send time
    (``send_rate``): what a capacity trial needs."""
    return tuple(name for name in DRIVER_NAMES if hasattr(DRIVERS.cls(name), "send_rate"))


def capabilities(name: str) -> frozenset[str]:
    """What driver ``name`` can do (see ``servelab.plugins.driver.CAPABILITIES``)."""
    return DRIVERS.cls(name).capabilities


def most_capable() -> str:
    return max(DRIVER_NAMES, key=lambda name: len(capabilities(name)))
