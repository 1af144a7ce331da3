"""uWSGI (WSGI only) as the app server: speaking HTTP, the uwsgi protocol or FastCGI."""

from __future__ import annotations

from pathlib import Path

from servelab.apps import ResolvedApp
from servelab.config.stack import ServerSpec
from servelab.servers.base import AppServer, Command, Listen
from servelab.servers.installed import require_script

LOG_NAME = "uwsgi.log"
_SOMAXCONN = Path("/proc/sys/net/core/somaxconn")
# The option that makes uWSGI listen with each protocol nginx may speak to it.
SOCKET_OPTION = {"http": "--http-socket", "uwsgi": "--socket", "fastcgi": "--fastcgi-socket"}


def somaxconn() -> int | None:
    try:
        return int(_SOMAXCONN.read_text())
    except (OSError, ValueError):
        return None


def uwsgi_command(
    server: ServerSpec,
    app: ResolvedApp,
    *,
    protocol: str = "http",
    port: int | None = None,
    socket: Path | None = None,
    max_backlog: int | None = None,
) -> list[str]:
    """argv running ``app`` under uWSGI's master with ``server.workers`` processes.

    uWSGI refuses to start with a listen queue above net.core.somaxconn, so the
    backlog is capped at ``max_backlog`` (somaxconn where the stack runs).
    ``--die-on-term`` makes SIGTERM stop it (by default SIGTERM reloads).
    """
    if server.kind != "uwsgi":
        raise ValueError(f"server kind {server.kind!r} is not uwsgi")
    if protocol not in SOCKET_OPTION:
        raise ValueError(f"unknown protocol {protocol!r}")
    UWsgi().check_app(server, app)
    if socket is not None:
        where = str(socket)
    elif port is not None:
        where = f"127.0.0.1:{port}"
    else:
        raise ValueError("give a port or a socket path")
    backlog = server.backlog if max_backlog is None else min(server.backlog, max_backlog)
    argv = [
        require_script("uwsgi", app.interpreter),
        SOCKET_OPTION[protocol], where,
        "--module", app.import_path,
        "--master",
        "--processes", str(server.workers),
        "--threads", str(server.threads),
        "--enable-threads",
        "--listen", str(backlog),
        "--harakiri", str(server.timeout_s),
        "--die-on-term",
        # Skip the interpreter's atexit teardown on stop: without it a worker caught in
        # teardown (KeyboardInterrupt) can outlive the grace period and be SIGKILLed.
        "--skip-atexit",
        "--need-app",  # exit, rather than serve 500s, when the app fails to import
        "--strict",  # an unknown option is an error
        "--disable-logging",  # no per-request log lines
        "--buffer-size", "32768",
    ]
    if app.app_dir is not None:
        argv += ["--chdir", str(app.app_dir), "--pythonpath", str(app.app_dir)]
    if server.max_requests:
        argv += ["--max-requests", str(server.max_requests)]
    return argv


class UWsgi(AppServer):
    kind = "uwsgi"
    interfaces = frozenset({"wsgi"})
    knobs = frozenset({"threads", "max_requests"})
    protocols = frozenset(SOCKET_OPTION)
    calls_factories = False
    packages = ("pyuwsgi|uwsgi",)  # the prebuilt wheel, or uWSGI built from source
    extra = "uwsgi"

    def command(
        self, server: ServerSpec, app: ResolvedApp, listen: Listen, workdir: Path,
        stack_name: str = "stack",
    ) -> Command:
        # uWSGI refuses a backlog above somaxconn where it runs; others are capped silently.
        cap = somaxconn() if listen.max_backlog is None else listen.max_backlog
        argv = uwsgi_command(
            server, app, protocol=listen.protocol, port=listen.port, socket=listen.socket,
            max_backlog=cap,
        )
        return Command(argv, LOG_NAME)
