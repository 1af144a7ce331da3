"""gunicorn as the app server: worker class check, config rendering, command line."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from servelab.apps import ResolvedApp
from servelab.config.stack import ServerSpec, StackSpec
from servelab.errors import SpecError
from servelab.host.templates import render
from servelab.plugins.server import (
    AppServer,
    Command,
    DeployTarget,
    Listen,
    ServerDeploy,
    run_check,
)

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

    app: str  # gunicorn's target, "package.module:app" (a factory: "package.module:f()")
    proc_name: str
    app_dir: Path  # gunicorn's chdir and pythonpath
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
    return [app.interpreter, "-m", "gunicorn", "-c", str(conf_path), app.gunicorn_target]


class Gunicorn(AppServer):
    kind = "gunicorn"
    ends_slow_requests = True  # its master kills a worker silent for timeout_s
    log_line = _GUNICORN_LINE
    knobs = frozenset({"threads", "worker_class", "max_requests", "max_requests_jitter"})
    packages = ("gunicorn", "uvicorn-worker")

    def needs(self, server: ServerSpec) -> tuple[str, ...]:
        return self.packages if server.worker_class == "uvicorn" else ("gunicorn",)

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

    def deploy(self, stack: StackSpec, target: DeployTarget) -> ServerDeploy:
        server = stack.server
        conf = render_gunicorn_conf(
            server,
            bind=bind_address(socket=target.socket, port=target.port),
            errorlog="-",
            stack_name=stack.name,
            deploy=GunicornDeploy(
                app=target.app,
                proc_name=target.name,
                app_dir=target.app_dir,
                umask=target.socket_umask,
                graceful_timeout_s=target.graceful_timeout_s,
                source=target.source,
            ),
        )
        notes = []
        if server.worker_class == "sync" and stack.proxy.upstream_keepalive:
            notes.append(
                "gunicorn's sync worker closes every connection after its response, so "
                f"{target.front}'s upstream keepalive pool stays empty with it; the setting is "
                "kept as measured"
            )
        packages = self.needs(server)
        return ServerDeploy(
            exec_start=[
                str(target.venv / "bin" / "gunicorn"), "-c", str(target.conf_dir / CONF_NAME)
            ],
            summary=(
                f"gunicorn with the `{server.worker_class}` worker, {server.workers} workers "
                f"× {server.threads} threads"
            ),
            timeout=(
                f"gunicorn kills a worker silent for {server.timeout_s} s; "
                f"{target.front_waits(stack.proxy.timeout_s)}, so a stuck request is ended "
                "and logged by the app, not turned into a 504 while the app still works on it."
            ),
            packages=packages,
            files={CONF_NAME: conf},
            file_roles={CONF_NAME: "gunicorn's settings, the app included (`wsgi_app`)"},
            notify=True,
            app_named_in=f"`wsgi_app` in {CONF_NAME}",
            umask_also_in=f"`umask = 0o007` in {CONF_NAME}",
            notes=tuple(notes),
        )

    def check_deploy(
        self, conf_dir: Path, cwd: Path, env: Mapping[str, str], python: str
    ) -> str:
        """``gunicorn --check-config`` on the staged config; it also imports the app."""
        conf = conf_dir / CONF_NAME
        argv = [python, "-m", "gunicorn", "--check-config", "-c", str(conf)]
        run_check(
            argv, cwd, env, "gunicorn --check-config",
            f"the exported {CONF_NAME} fails gunicorn --check-config",
        )
        return f"gunicorn --check-config accepts {CONF_NAME} and loads the app"
