"""granian (Rust HTTP server, ASGI or WSGI) as the app server: command line."""

from __future__ import annotations

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

LOG_NAME = "granian.log"
GRACEFUL_TIMEOUT_S = 3


def granian_command(
    server: ServerSpec,
    app: ResolvedApp,
    *,
    port: int | None = None,
    socket: Path | None = None,
) -> list[str]:
    """argv running ``app`` with granian on 127.0.0.1:``port`` or the unix ``socket``.

    ``threads`` sets granian's runtime threads (the Rust I/O threads of each
    worker), ``blocking_threads`` the Python threads that run the app's code.
    ``timeout_s`` and ``keepalive_s`` have no granian equivalent and are not passed.
    """
    if server.kind != "granian":
        raise ValueError(f"server kind {server.kind!r} is not granian")
    if socket is not None:
        where = ["--uds", str(socket)]
    elif port is not None:
        where = ["--host", "127.0.0.1", "--port", str(port)]
    else:
        raise ValueError("give a port or a socket path")
    argv = [app.interpreter, "-m", "granian", *where]
    argv += ["--interface", "wsgi" if app.interface == "wsgi" else "asgi"]
    if app.is_factory:
        argv.append("--factory")
    if app.app_dir is not None:
        argv += ["--working-dir", str(app.app_dir)]
    argv += [
        "--http", "1",  # nginx and the load drivers speak HTTP/1.1
        "--no-ws",
        "--workers", str(server.workers),
        "--runtime-threads", str(server.threads),
        "--backlog", str(server.backlog),
        "--workers-kill-timeout", str(GRACEFUL_TIMEOUT_S),
        "--no-access-log",
        "--log-level", "warning",
    ]
    if server.blocking_threads is not None:
        argv += ["--blocking-threads", str(server.blocking_threads)]
    return [*argv, app.import_path]


class Granian(AppServer):
    kind = "granian"
    knobs = frozenset({"threads", "blocking_threads"})
    packages = ("granian",)
    extra = "servers"

    def check_knobs(self, server: ServerSpec) -> None:
        super().check_knobs(server)
        if server.backlog < 128:
            raise ValueError(f"granian needs backlog >= 128 (got {server.backlog})")
        if server.max_requests:
            raise ValueError("granian has no max_requests (it restarts workers by time or RSS)")

    def command(
        self, server: ServerSpec, app: ResolvedApp, listen: Listen, workdir: Path,
        stack_name: str = "stack",
    ) -> Command:
        return Command(
            granian_command(server, app, port=listen.port, socket=listen.socket), LOG_NAME
        )

    def deploy(self, stack: StackSpec, target: DeployTarget) -> ServerDeploy:
        """The measured command line, with the target's interpreter and places."""
        server = stack.server
        app = resolve_app(stack.app)  # tells ASGI from WSGI, which decides a flag
        argv = deploy_argv(
            granian_command(server, app, port=target.port, socket=target.socket),
            app.interpreter,
            target,
            {
                "--workers-kill-timeout": str(target.graceful_timeout_s),
                "--working-dir": str(target.app_dir),
            },
        )
        if target.socket_umask is not None:  # rw for owner and group only
            permissions = 0o666 & ~target.socket_umask
            argv[-1:-1] = ["--uds-permissions", f"0{permissions:o}"]
        threads = (
            f", {server.blocking_threads} blocking threads" if server.blocking_threads else ""
        )
        return ServerDeploy(
            exec_start=argv,
            summary=(
                f"granian ({'WSGI' if app.interface == 'wsgi' else 'ASGI'}) with "
                f"{server.workers} workers × {server.threads} runtime threads{threads}"
            ),
            timeout=(
                "granian has no request timeout (it never kills a busy worker); "
                f"{target.front_waits(stack.proxy.timeout_s)}."
            ),
            packages=self.packages,
            umask_also_in="`--uds-permissions` on granian's command line"
            if target.socket_umask is not None else "",
        )
