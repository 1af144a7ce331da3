"""Every app server servelab can launch: kind -> "module:Class", imported when first used
(as uvicorn's ``HTTP_PROTOCOLS``). Adding a server is one module and one line here."""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servelab.servers.base import AppServer

SERVERS: dict[str, str] = {
    "gunicorn": "servelab.servers.gunicorn:Gunicorn",
    "uvicorn": "servelab.servers.uvicorn:Uvicorn",
    "granian": "servelab.servers.granian:Granian",
    "hypercorn": "servelab.servers.hypercorn:Hypercorn",
    "uwsgi": "servelab.servers.uwsgi:UWsgi",
    "mod_wsgi": "servelab.servers.mod_wsgi:ModWsgi",
}
SERVER_KINDS = tuple(SERVERS)
DEFAULT_SERVER = SERVER_KINDS[0]


@cache
def get_server(kind: str) -> AppServer:
    """The server of ``kind`` (KeyError for an unknown kind: spec validation says which)."""
    module, _, name = SERVERS[kind].partition(":")
    return getattr(importlib.import_module(module), name)()


def standalone_servers() -> tuple[str, ...]:
    """The servers that run as their own processes (not inside a front)."""
    return tuple(k for k in SERVER_KINDS if get_server(k).inside_front is None)
