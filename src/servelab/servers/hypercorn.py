"""hypercorn (ASGI, and WSGI) as the app server: command line."""

from __future__ import annotations

from pathlib import Path

from servelab.apps import ResolvedApp
from servelab.config.stack import ServerSpec
from servelab.servers.base import AppServer, Command, Listen

LOG_NAME = "hypercorn.log"
GRACEFUL_TIMEOUT_S = 3


def hypercorn_command(
    server: ServerSpec,
    app: ResolvedApp,
    *,
    port: int | None = None,
    socket: Path | None = None,
) -> list[str]:
    """argv running ``app`` with hypercorn on 127.0.0.1:``port`` or the unix ``socket``.

    The app dir is the server's cwd and first on PYTHONPATH (hypercorn has no
    --app-dir); ``timeout_s`` has no hypercorn equivalent and is not passed.
    """
    if server.kind != "hypercorn":
        raise ValueError(f"server kind {server.kind!r} is not hypercorn")
    if socket is not None:
        bind = f"unix:{socket}"
    elif port is not None:
        bind = f"127.0.0.1:{port}"
    else:
        raise ValueError("give a port or a socket path")
    # hypercorn calls a factory given as "module:attr()".
    target = f"{app.import_path}()" if app.is_factory else app.import_path
    argv = [
        app.interpreter, "-m", "hypercorn",
        "--bind", bind,
        "--workers", str(server.workers),
        "--backlog", str(server.backlog),
        "--keep-alive", str(server.keepalive_s),
        "--graceful-timeout", str(GRACEFUL_TIMEOUT_S),
        "--error-logfile", "-",
        "--log-level", "warning",
    ]
    if server.max_requests:
        argv += ["--max-requests", str(server.max_requests)]
    if server.max_requests_jitter:
        argv += ["--max-requests-jitter", str(server.max_requests_jitter)]
    return [*argv, target]


class Hypercorn(AppServer):
    kind = "hypercorn"
    knobs = frozenset({"max_requests", "max_requests_jitter"})
    packages = ("hypercorn",)
    extra = "servers"

    def command(
        self, server: ServerSpec, app: ResolvedApp, listen: Listen, workdir: Path,
        stack_name: str = "stack",
    ) -> Command:
        return Command(
            hypercorn_command(server, app, port=listen.port, socket=listen.socket), LOG_NAME
        )
