"""gunicorn as the app server: worker class check, config rendering, command line."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from servelab.apps import ResolvedApp
from servelab.config.stack import ServerSpec
from servelab.errors import SpecError
from servelab.launch.templates import render
from servelab.servers.base import AppServer, Command, Listen

CONF_NAME = "gunicorn.conf.py"
# gunicorn: "[2026-11-22 00:31:03 +0000] [29668] [INFO] message"
_GUNICORN_LINE = re.compile(r"^\[[^\]]+\] \[\d+\] \[(?P<level>[A-Z]+)\] (?P<msg>.*)$")
LOG_NAME = "gunicorn.log"
GRACEFUL_TIMEOUT_S = 3

WORKER_CLASSES: dict[str, str] = {
    "uvicorn": "uvicorn_worker.UvicornWorker",
    "sync": "sync",
    "gthread": "gthread",
}
_INTERFACE_OF_CLASS = {"uvicorn": "asgi", "sync": "wsgi", "gthread": "wsgi"}
# The worker class a user's app gets when a study's class cannot serve it.
_FITTING_CLASS = {"wsgi": "gthread", "asgi": "uvicorn"}


def check_worker_class(server: ServerSpec, app: ResolvedApp) -> None:
    """SpecError when the worker class cannot serve the app's interface."""
    needed = _INTERFACE_OF_CLASS[server.worker_class]
    if app.interface == needed:
        return
    if app.interface == "wsgi":
        raise SpecError(
            f"app {app.import_path} is a WSGI app, but gunicorn worker_class "
            f"{server.worker_class!r} serves ASGI apps",
            "use worker_class 'sync' or 'gthread' for a WSGI app",
        )
    raise SpecError(
        f"app {app.import_path} is an ASGI app, but gunicorn worker_class "
        f"{server.worker_class!r} serves WSGI apps",
        "use worker_class 'uvicorn' for an ASGI app",
    )


def bind_address(*, port: int | None = None, socket: Path | None = None) -> str:
    """gunicorn's ``bind``: ``127.0.0.1:PORT`` or ``unix:PATH``."""
    if socket is not None:
        return f"unix:{socket}"
    if port is None:
        raise ValueError("give a port or a socket path")
    return f"127.0.0.1:{port}"


@dataclass(frozen=True)
class GunicornDeploy:
    """What an exported gunicorn.conf.py (``servelab export``) adds for a real machine."""

    app: str  # gunicorn's target, "package.module:app"
    proc_name: str
    umask: int | None  # for a unix socket: 0o007, so only owner and group can connect
    graceful_timeout_s: int = 30
    source: str = "a servelab result"  # named in the header comment


def render_gunicorn_conf(
    server: ServerSpec,
    *,
    bind: str,
    errorlog: Path | str,
    stack_name: str = "stack",
    deploy: GunicornDeploy | None = None,
) -> str:
    """The text of gunicorn.conf.py for ``server`` listening on ``bind``.

    With ``deploy``, the same settings for a real machine: the app named in the
    file, a longer graceful timeout and the socket's umask.
    """
    if server.kind != "gunicorn":
        raise ValueError(f"server kind {server.kind!r} is not gunicorn")
    return render(
        "gunicorn.conf.py.j2",
        server=server,
        bind=bind,
        worker_class=WORKER_CLASSES[server.worker_class],
        graceful_timeout_s=deploy.graceful_timeout_s if deploy else GRACEFUL_TIMEOUT_S,
        deploy=deploy,
        # A heartbeat file on tmpfs: on a disk-backed /tmp it can stall workers.
        worker_tmp_dir="/dev/shm" if os.path.isdir("/dev/shm") else None,
        errorlog=str(errorlog),
        stack_name=stack_name,
    )


def write_gunicorn_conf(
    server: ServerSpec, *, workdir: Path, bind: str, stack_name: str = "stack"
) -> Path:
    conf = workdir / CONF_NAME
    conf.write_text(
        render_gunicorn_conf(
            server, bind=bind, errorlog=workdir / LOG_NAME, stack_name=stack_name
        )
    )
    return conf


def gunicorn_command(conf_path: Path, app: ResolvedApp) -> list[str]:
    return [sys.executable, "-m", "gunicorn", "-c", str(conf_path), app.gunicorn_target]


class Gunicorn(AppServer):
    kind = "gunicorn"
    log_line = _GUNICORN_LINE
    knobs = frozenset({"threads", "worker_class", "max_requests", "max_requests_jitter"})
    packages = ("gunicorn", "uvicorn-worker")

    def check_app(self, server: ServerSpec, app: ResolvedApp) -> None:
        check_worker_class(server, app)

    def fit_to_app(self, server: ServerSpec, app: ResolvedApp) -> tuple[ServerSpec, str]:
        if _INTERFACE_OF_CLASS[server.worker_class] == app.interface:
            return server, ""
        fitted = _FITTING_CLASS[app.interface]
        change = f"gunicorn worker class {server.worker_class} -> {fitted}"
        return server.model_copy(update={"worker_class": fitted}), change

    def command(
        self, server: ServerSpec, app: ResolvedApp, listen: Listen, workdir: Path,
        stack_name: str = "stack",
    ) -> Command:
        bind = bind_address(port=listen.port, socket=listen.socket)
        conf = write_gunicorn_conf(server, workdir=workdir, bind=bind, stack_name=stack_name)
        return Command(gunicorn_command(conf, app), LOG_NAME)

    def describe(self, server: ServerSpec) -> str:
        return f"gunicorn[{server.worker_class}] workers={server.workers} threads={server.threads}"
