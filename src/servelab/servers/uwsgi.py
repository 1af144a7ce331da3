"""uWSGI (WSGI only) as the app server: speaking HTTP, the uwsgi protocol or FastCGI."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from servelab.apps import ResolvedApp
from servelab.config.stack import ServerSpec, StackSpec
from servelab.plugins.server import (
    AppServer,
    Command,
    DeployTarget,
    Listen,
    ServerDeploy,
    run_check,
)
from servelab.servers.installed import require_script

LOG_NAME = "uwsgi.log"
CONF_NAME = "uwsgi.ini"
_SOMAXCONN = Path("/proc/sys/net/core/somaxconn")
# The option that makes uWSGI listen with each protocol nginx may speak to it.
SOCKET_OPTION = {"http": "--http-socket", "uwsgi": "--socket", "fastcgi": "--fastcgi-socket"}


def somaxconn() -> int | None:
    try:
        return int(_SOMAXCONN.read_text())
    except (OSError, ValueError):
        return None


def uwsgi_options(
    server: ServerSpec,
    module: str,
    app_dir: Path | None,
    *,
    protocol: str,
    where: str,
    backlog: int,
) -> list[tuple[str, str | None]]:
    """uWSGI's options (name, value; None: a flag) serving ``module`` on ``where`` (a
    socket path or ``127.0.0.1:PORT``): the command line's, and an exported uwsgi.ini's."""
    if protocol not in SOCKET_OPTION:
        raise ValueError(f"unknown protocol {protocol!r}")
    options: list[tuple[str, str | None]] = [
        (SOCKET_OPTION[protocol].removeprefix("--"), where),
        ("module", module),
        ("master", None),
        ("processes", str(server.workers)),
        ("threads", str(server.threads)),
        ("enable-threads", None),
        ("listen", str(backlog)),
        ("harakiri", str(server.timeout_s)),
        ("die-on-term", None),  # by default SIGTERM reloads
        ("need-app", None),  # exit, rather than serve 500s, when the app fails to import
        ("strict", None),  # an unknown option is an error
        ("disable-logging", None),  # no per-request log lines
        ("buffer-size", "32768"),
    ]
    if app_dir is not None:
        options += [("chdir", str(app_dir)), ("pythonpath", str(app_dir))]
    if server.max_requests:
        options.append(("max-requests", str(server.max_requests)))
    return options


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
    UWsgi().check_app(server, app)
    backlog = server.backlog if max_backlog is None else min(server.backlog, max_backlog)
    options = uwsgi_options(
        server, app.import_path, app.app_dir, protocol=protocol,
        where=_where(port=port, socket=socket), backlog=backlog,
    )
    # Skip the interpreter's atexit teardown on stop: without it a worker caught in
    # teardown (KeyboardInterrupt) can outlive the grace period and be SIGKILLed.
    options.append(("skip-atexit", None))
    argv = [require_script("uwsgi", app.interpreter)]
    for name, value in options:
        argv += [f"--{name}"] if value is None else [f"--{name}", value]
    return argv


def _where(*, port: int | None, socket: Path | None) -> str:
    if socket is not None:
        return str(socket)
    if port is None:
        raise ValueError("give a port or a socket path")
    return f"127.0.0.1:{port}"


class UWsgi(AppServer):
    kind = "uwsgi"
    interfaces = frozenset({"wsgi"})
    knobs = frozenset({"threads", "max_requests"})
    protocols = frozenset(SOCKET_OPTION)
    calls_factories = False
    ends_slow_requests = True  # harakiri: a worker busy for timeout_s is killed
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

    def deploy(self, stack: StackSpec, target: DeployTarget) -> ServerDeploy:
        """uwsgi.ini with the measured options (``uwsgi --ini``)."""
        server = stack.server
        where = _where(port=target.port, socket=target.socket)
        options = uwsgi_options(
            server, target.app, target.app_dir, protocol=stack.proxy.protocol, where=where,
            backlog=server.backlog,  # the exported sysctl snippet raises somaxconn to it
        )
        options.append(("worker-reload-mercy", str(target.graceful_timeout_s)))
        if target.socket_umask is not None:  # rw for owner and group only
            options += [("chmod-socket", f"{0o666 & ~target.socket_umask:o}"), ("vacuum", None)]
        lines = [
            f"; Written by `servelab export` for variant {stack.name} of {target.source};",
            "; read by `uwsgi --ini` (see the systemd unit). README.md explains every choice.",
            "[uwsgi]",
            *(f"{name} = {'true' if value is None else value}" for name, value in options),
        ]
        notes = []
        if stack.proxy.protocol != "http":
            notes.append(
                f"the front speaks the {stack.proxy.protocol} protocol to uWSGI, as measured"
            )
        return ServerDeploy(
            exec_start=[
                str(target.venv / "bin" / "uwsgi"), "--ini", str(target.conf_dir / CONF_NAME)
            ],
            summary=f"uWSGI with {server.workers} processes × {server.threads} threads",
            timeout=(
                f"uWSGI kills a worker busy for {server.timeout_s} s (`harakiri`); "
                f"{target.front_waits(stack.proxy.timeout_s)}, so a stuck request is ended and "
                "logged by the app, not turned into a 504 while the app still works on it."
            ),
            packages=("pyuwsgi",),
            files={CONF_NAME: "\n".join(lines) + "\n"},
            file_roles={CONF_NAME: "uWSGI's options, the app included (`module`)"},
            app_named_in=f"`module` in {CONF_NAME}",
            umask_also_in=f"`chmod-socket = 660` in {CONF_NAME}"
            if target.socket_umask is not None else "",
            notes=tuple(notes),
        )

    def check_deploy(
        self, conf_dir: Path, cwd: Path, env: Mapping[str, str], python: str
    ) -> str:
        """uWSGI's own option parsing of the staged file (strict: every option known), which
        ``--get`` ends before anything starts."""
        conf = str(conf_dir / CONF_NAME)
        argv = [require_script("uwsgi", python), "--ini", conf, "--get", "module"]
        run_check(
            argv, cwd, env, "uwsgi --get", f"the exported {CONF_NAME} fails uWSGI's parser"
        )
        return f"uWSGI's strict option parser accepts {CONF_NAME} (`uwsgi --ini ... --get`)"
