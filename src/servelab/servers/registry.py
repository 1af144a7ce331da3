"""Every app server servelab can launch; adding a server is one module and one line here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab.registry import Registry

if TYPE_CHECKING:
    from servelab.servers.base import AppServer

SERVERS: Registry[AppServer] = Registry(
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
get_server = SERVERS.get


def standalone_servers() -> tuple[str, ...]:
    """The servers that run as their own processes (not inside a front)."""
    return SERVERS.where(lambda server: server.inside_front is None)
