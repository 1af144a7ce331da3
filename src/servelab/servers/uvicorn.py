"""uvicorn alone as the app server (its own ``--workers`` process manager)."""

from __future__ import annotations

import re
from pathlib import Path

from servelab.apps import ResolvedApp, resolve_app
from servelab.config.stack import ServerSpec, StackSpec
from servelab.plugins.server import (
    AppServer,
    Command,
    DeployTarget,
    Listen,
    ServerDeploy,
    deploy_argv,
)

# uvicorn alone: "WARNING:  message"
_UVICORN_LINE = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+(?P<msg>.*)$")
LOG_NAME = "uvicorn.log"
GRACEFUL_TIMEOUT_S = 3


def uvicorn_command(
    server: ServerSpec,
    app: ResolvedApp,
    *,
    port: int | None = None,
    socket: Path | None = None,
) -> list[str]:
    """argv running ``app`` with uvicorn on 127.0.0.1:``port`` or the unix ``socket``.

    ``server.timeout_s`` has no uvicorn equivalent (uvicorn never kills a busy
    worker) and is not passed.
    """
    if server.kind != "uvicorn":
        raise ValueError(f"server kind {server.kind!r} is not uvicorn")
    if socket is not None:
        where = ["--uds", str(socket)]
    elif port is not None:
        where = ["--host", "127.0.0.1", "--port", str(port)]
    else:
        raise ValueError("give a port or a socket path")
    argv = [app.interpreter, "-m", "uvicorn", app.import_path, *where]
    # Say the interface rather than let uvicorn guess (it may take a sync
    # 3-argument callable for ASGI2).
    argv += ["--interface", "wsgi" if app.interface == "wsgi" else "asgi3"]
    if app.is_factory:
        argv.append("--factory")
    if app.app_dir is not None:
        argv += ["--app-dir", str(app.app_dir)]
    argv += [
        "--workers", str(server.workers),
        "--backlog", str(server.backlog),
        "--timeout-keep-alive", str(server.keepalive_s),
        "--timeout-graceful-shutdown", str(GRACEFUL_TIMEOUT_S),
        "--no-access-log",
        "--log-level", "warning",
    ]
    if server.max_requests:
        argv += ["--limit-max-requests", str(server.max_requests)]
    if server.max_requests_jitter:
        argv += ["--limit-max-requests-jitter", str(server.max_requests_jitter)]
    return argv


class Uvicorn(AppServer):
    kind = "uvicorn"
    log_line = _UVICORN_LINE
    knobs = frozenset({"max_requests", "max_requests_jitter"})
    # Inherited from a gunicorn baseline (gunicorn-vs-uvicorn): accepted, not used.
    ignored_knobs = frozenset({"worker_class"})
    packages = ("uvicorn",)

    def command(
        self, server: ServerSpec, app: ResolvedApp, listen: Listen, workdir: Path,
        stack_name: str = "stack",
    ) -> Command:
        return Command(
            uvicorn_command(server, app, port=listen.port, socket=listen.socket), LOG_NAME
        )

    def deploy(self, stack: StackSpec, target: DeployTarget) -> ServerDeploy:
        """The measured command line, with the target's interpreter and places."""
        app = resolve_app(stack.app)  # tells ASGI from WSGI, which decides a flag
        argv = deploy_argv(
            uvicorn_command(stack.server, app, port=target.port, socket=target.socket),
            app.interpreter,
            target,
            {
                "--timeout-graceful-shutdown": str(target.graceful_timeout_s),
                "--app-dir": str(target.app_dir),
            },
        )
        notes = [
            "uvicorn has no request timeout (it never kills a busy worker); "
            f"{target.front}'s {stack.proxy.timeout_s} s timeouts are the only limit"
        ]
        if target.socket is not None:
            notes.append(
                "uvicorn makes its socket file rw for everyone; the socket's directory "
                f"({target.socket.parent}, mode 0750, group {target.socket_group}) is what "
                "keeps other users out"
            )
        return ServerDeploy(
            exec_start=argv,
            summary=f"uvicorn with {stack.server.workers} workers",
            timeout=f"uvicorn has no request timeout; {target.front_waits(stack.proxy.timeout_s)}.",
            packages=("uvicorn",),
            notes=tuple(notes),
        )
