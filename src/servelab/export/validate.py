"""Check exported files with the real tools, and boot them away from the target's paths.

The exported files name the target machine's places (/etc/NAME, /run/NAME,
/var/lib/NAME-nginx, /opt/NAME, port 80). ``stage`` copies them into a
private directory with every such path moved under it, loopback ports that
are free right now, and nginx's workers as a user that can reach the staged
socket; the rest of each file is left exactly as exported. The staged copy
is then checked (``nginx -t``, and the app server's own check, e.g.
``gunicorn --check-config``, which also imports the app) or booted: the app
server from the unit's own ExecStart line and environment, nginx in front, and
a real request through both.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from servelab.apps import app_environment
from servelab.config.load import RequestSpec
from servelab.errors import ServelabError, StackStartError
from servelab.export.deploy import APP_PORT, NGINX_CONF, README, DeployLayout
from servelab.fronts import nginx
from servelab.host.procs import ManagedProcess, free_port
from servelab.launch import OWNER_ENV
from servelab.launch.readiness import wait_listening, wait_ready
from servelab.servers.base import AppServer

CHECK_TIMEOUT_S = 60.0
_USER_LINE = re.compile(r"^(\s*)user\s+([^;\s]+)[^;]*;", re.MULTILINE)
_LISTEN_LINE = re.compile(r"^(\s*)listen\s+[^;]+;", re.MULTILINE)


@dataclass(frozen=True)
class StagedDeploy:
    """An exported set, moved into ``root`` and ready to check or boot."""

    root: Path
    nginx_conf: Path
    conf_dir: Path  # where the units expect the configs (nginx's and the app server's)
    app_argv: list[str]
    app_env: dict[str, str]
    app_cwd: Path
    app_address: tuple[str, int] | Path
    front_url: str
    python: str  # the interpreter that runs the app here


def _unit_values(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


def stage(export_dir: Path, layout: DeployLayout, root: Path, *, for_boot: bool) -> StagedDeploy:
    """Copy the exported set in ``export_dir`` into ``root``, with its places moved there.

    ``for_boot``: nginx's workers run as the current user (as root: root), so
    that they can reach the staged socket; otherwise the exported user is kept
    when it exists on this machine, so that ``nginx -t`` checks it.
    """
    moved = {path: root / key for key, path in layout.machine_paths().items()}
    for path in moved.values():
        path.mkdir(parents=True, exist_ok=True)
    pattern = re.compile(
        "(" + "|".join(re.escape(str(p)) for p in sorted(moved, key=lambda p: -len(str(p))))
        + r")(?![\w.-])"
    )
    listen_port = free_port()
    app_port = free_port()
    while app_port == listen_port:
        app_port = free_port()

    def move(text: str) -> str:
        text = pattern.sub(lambda m: str(moved[Path(m.group(1))]), text)
        return text.replace(f"127.0.0.1:{APP_PORT}", f"127.0.0.1:{app_port}")

    conf = move((export_dir / NGINX_CONF).read_text())
    conf = _LISTEN_LINE.sub(rf"\g<1>listen 127.0.0.1:{listen_port};", conf)
    conf = _USER_LINE.sub(lambda m: _user_line(m, for_boot), conf)
    conf_dir = moved[layout.conf_dir]  # where the units expect the configs
    nginx_conf = conf_dir / NGINX_CONF
    nginx_conf.write_text(conf)

    not_configs = {NGINX_CONF, README, layout.app_unit, layout.nginx_unit, layout.sysctl_file}
    for path in export_dir.iterdir():  # the app server's config files, places moved
        if path.name not in not_configs:
            (conf_dir / path.name).write_text(move(path.read_text()))

    unit = (export_dir / layout.app_unit).read_text()
    argv = shlex.split(move(_unit_values(unit, "ExecStart")[0]))
    argv = _runnable_here(argv, layout, moved)
    if "--port" in argv:
        argv[argv.index("--port") + 1] = str(app_port)
    env: dict[str, str] = {}
    for value in _unit_values(unit, "Environment"):
        for item in shlex.split(value):
            key, _, val = item.partition("=")
            env[key] = val
    cwd = Path(move(_unit_values(unit, "WorkingDirectory")[0]))
    own_python = layout.own_venv / "bin" / "python" if layout.own_venv else None
    app_env = app_environment(env, None, own_python)
    app_env.update({"PYTHONUNBUFFERED": "1", OWNER_ENV: str(os.getpid())})
    unix = f"unix:{moved[layout.app_run_dir]}" in conf
    address: tuple[str, int] | Path = (
        moved[layout.app_run_dir] / layout.socket.name if unix else ("127.0.0.1", app_port)
    )
    return StagedDeploy(
        root, nginx_conf, conf_dir, argv, app_env, cwd, address,
        f"http://127.0.0.1:{listen_port}", str(own_python or sys.executable),
    )


def _user_line(match: re.Match[str], for_boot: bool) -> str:
    indent, user = match.group(1), match.group(2)
    if for_boot:
        return f"{indent}user root;" if os.geteuid() == 0 else f"{indent}# user {user}; (staged)"
    try:
        pwd.getpwnam(user)
    except KeyError:
        return f"{indent}# user {user}; (no such user on this machine)"
    return match.group(0)


def _runnable_here(argv: list[str], layout: DeployLayout, moved: dict[Path, Path]) -> list[str]:
    """The unit's command with the target's venv replaced by this Python (the app's own
    venv, measured here, runs as it is)."""
    if layout.own_venv is not None:
        return argv
    venv_bin = moved[layout.venv] / "bin"
    program = Path(argv[0])
    if program == venv_bin / "python":
        return [sys.executable, *argv[1:]]
    if program.parent == venv_bin:  # a server's console script, as ``python -m`` here
        return [sys.executable, "-m", program.name, *argv[1:]]
    raise ServelabError(
        f"the exported unit runs {argv[0]}, not a program of its venv",
        "this is a servelab bug; please report it",
    )


def check_nginx(staged: StagedDeploy) -> None:
    """``nginx -t`` on the staged nginx.conf."""
    try:
        nginx.nginx_check(staged.nginx_conf, timeout_s=CHECK_TIMEOUT_S)
    except StackStartError as exc:
        raise ServelabError(
            f"the exported nginx.conf fails nginx -t: {exc.problem.split(': ', 1)[-1]}",
            "this is a servelab bug unless a knob is out of nginx's range; see nginx's message",
            detail=exc.detail,
        ) from None


def check_export(
    export_dir: Path, layout: DeployLayout, server: AppServer, probe: RequestSpec
) -> list[str]:
    """Run every check on an exported set: nginx -t, the server's own check, then boot
    it and send ``probe`` (the measured request, expecting the measured status); what
    was checked, one line each. ServelabError (one line) for the first that fails."""
    root = Path(tempfile.mkdtemp(prefix="servelab-check-", dir="/tmp"))
    try:
        staged = stage(export_dir, layout, root / "check", for_boot=False)
        check_nginx(staged)
        checks = ["nginx -t accepts nginx.conf"]
        checked = server.check_deploy(
            staged.conf_dir, staged.app_cwd, staged.app_env, staged.python
        )
        if checked:
            checks.append(checked)
        booted = stage(export_dir, layout, root / "boot", for_boot=True)
        try:
            with boot(booted, probe):
                pass
        except StackStartError as exc:
            said = _last_error(booted.root / "app.log")
            raise ServelabError(
                f"the exported stack did not answer {probe.method} {probe.path} with HTTP "
                f"{probe.expect_status}: {exc.problem.split(' (waited')[0]}"
                + (f"; the app server said: {said}" if said else ""),
                "this is a servelab bug unless the app needs something this machine lacks "
                "(then pass --no-check)",
            ) from None
        checks.append(
            f"booted: {probe.method} {probe.path} through the exported nginx and app server "
            f"answered HTTP {probe.expect_status}"
        )
        return checks
    finally:
        shutil.rmtree(root, ignore_errors=True)


_ERROR_LINE = re.compile(r"\b\w*(Error|Exception|Exit)\b.*")


def _last_error(log: Path) -> str:
    """The app server's last error line in ``log`` (an exception's message), or ''."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    for line in reversed(lines):
        found = _ERROR_LINE.search(line)
        if found:
            return found.group(0)[:300]
    return ""


@contextmanager
def boot(staged: StagedDeploy, probe: RequestSpec, *, timeout_s: float = 30.0) -> Iterator[str]:
    """Run the staged app server and nginx until the block ends; yields nginx's URL
    once ``probe`` gets its expected answer through both. Both are always stopped."""
    processes: dict[str, ManagedProcess] = {}
    try:
        processes["app"] = ManagedProcess(
            "app server", staged.app_argv, log_path=staged.root / "app.log",
            cwd=staged.app_cwd, env=staged.app_env,
        ).start()
        wait_listening(staged.app_address, processes, timeout_s)
        processes["nginx"] = ManagedProcess(
            "nginx", nginx.nginx_command(staged.nginx_conf), log_path=staged.root / "nginx.out",
            cwd=staged.root, env={**os.environ, OWNER_ENV: str(os.getpid())},
        ).start()
        wait_ready(staged.front_url + probe.path, probe, processes, timeout_s)
        yield staged.front_url
    finally:
        failure: BaseException | None = None
        for proc in reversed(list(processes.values())):
            try:
                proc.stop()
            except BaseException as exc:  # keep stopping the others
                failure = failure or exc
        if failure is not None:
            raise failure
