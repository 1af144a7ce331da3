"""hypercorn (ASGI, and WSGI) as the app server: command line."""

from __future__ import annotations

import json
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

LOG_NAME = "hypercorn.log"
GRACEFUL_TIMEOUT_S = 3
CONF_NAME = "hypercorn.toml"
# Reads a TOML file as hypercorn does (Config.from_toml) and names any key that is none
# of its settings (from_toml would ignore it silently).
_CHECK_SCRIPT = """
import sys
from hypercorn import config
with open(sys.argv[1], "rb") as handle:
    data = config.tomllib.load(handle)
unknown = sorted(key for key in data if not hasattr(config.Config, key))
if unknown:
    sys.exit("not hypercorn settings: " + ", ".join(unknown))
config.Config.from_toml(sys.argv[1])
"""


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
    target = app.gunicorn_target
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

    def deploy(self, stack: StackSpec, target: DeployTarget) -> ServerDeploy:
        """hypercorn.toml with the measured settings; the app on the unit's command line."""
        server = stack.server
        bind = f"unix:{target.socket}" if target.socket else f"127.0.0.1:{target.port}"
        settings: dict[str, object] = {
            "bind": [bind],
            "workers": server.workers,
            "backlog": server.backlog,
            "keep_alive_timeout": server.keepalive_s,
            "graceful_timeout": target.graceful_timeout_s,
            "errorlog": "-",
            "loglevel": "WARNING",
        }
        if server.max_requests:
            settings["max_requests"] = server.max_requests
            settings["max_requests_jitter"] = server.max_requests_jitter
        lines = [
            f"# Written by `servelab export` for variant {json.dumps(stack.name)} of "
            f"{target.source};",
            "# read by `hypercorn --config` (see the systemd unit). README.md explains every "
            "choice.",
        ]
        # TOML's basic strings and arrays of them are JSON's.
        lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
        if target.socket_umask is not None:
            lines.append("# The socket: rw for owner and group only.")
            lines.append(f"umask = 0o{target.socket_umask:03o}")
        notes = [
            "hypercorn runs in the app's directory (the unit's WorkingDirectory), which it "
            "puts first on sys.path"
        ]
        return ServerDeploy(
            exec_start=[
                str(target.venv / "bin" / "python"), "-m", "hypercorn",
                "--config", str(target.conf_dir / CONF_NAME), target.app,
            ],
            summary=f"hypercorn with {server.workers} workers",
            timeout=(
                "hypercorn has no request timeout (it never kills a busy worker); "
                f"{target.front_waits(stack.proxy.timeout_s)}."
            ),
            packages=self.packages,
            files={CONF_NAME: "\n".join(lines) + "\n"},
            file_roles={CONF_NAME: "hypercorn's settings (`--config`)"},
            umask_also_in=f"`umask` in {CONF_NAME}" if target.socket_umask is not None else "",
            notes=tuple(notes),
        )

    def check_deploy(
        self, conf_dir: Path, cwd: Path, env: Mapping[str, str], python: str
    ) -> str:
        """hypercorn's own TOML loading (Config.from_toml) on the staged file, every key one
        of its settings."""
        argv = [python, "-c", _CHECK_SCRIPT, str(conf_dir / CONF_NAME)]
        run_check(
            argv, cwd, env, "hypercorn's Config.from_toml",
            f"the exported {CONF_NAME} fails hypercorn's Config.from_toml",
        )
        return f"hypercorn's Config.from_toml reads {CONF_NAME} (every key one of its settings)"
