"""Check exported files with the real tools, and boot them away from the target's paths.

The exported files name the target machine's places (/etc/NAME, /run/NAME,
/var/lib/NAME-FRONT, /opt/NAME, port 80). ``stage`` copies them into a
private directory with every such path moved under it (the target's venv
replaced by this Python's environment), loopback ports that are free right
now, and the front's workers as users that can reach the staged socket; the
rest of each file is left exactly as exported. The staged copy is then checked
(the front's own check, ``nginx -t`` or ``apache2 -t``, and the app server's,
e.g. ``gunicorn --check-config``, which also imports the app) or booted: the
app server from the unit's own ExecStart line and environment (unless the front
runs the app itself, mod_wsgi), the front in front, and a real request through
both.
"""

from __future__ import annotations

import os
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
from servelab.export.deploy import APP_PORT, README
from servelab.export.layout import DeployLayout
from servelab.host.procs import OWNER_ENV, ManagedProcess, free_port
from servelab.host.readiness import wait_listening, wait_ready
from servelab.plugins.front import Front, get_front
from servelab.plugins.server import AppServer

CHECK_ROOT_MODE = 0o711


@dataclass(frozen=True)
class StagedDeploy:
    """An exported set, moved into ``root`` and ready to check or boot."""

    root: Path
    front: Front
    front_conf: Path
    conf_dir: Path  # where the units expect the configs (the front's and the app server's)
    app_argv: list[str] | None  # None: the front runs the app itself
    app_env: dict[str, str]  # the app's environment (the front's, when it runs the app)
    app_cwd: Path
    app_address: tuple[str, int] | Path | None  # None: the front runs the app itself
    front_url: str
    python: str  # the interpreter that runs the app here


def _unit_values(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


def stage(export_dir: Path, layout: DeployLayout, root: Path, *, for_boot: bool) -> StagedDeploy:
    """Copy the exported set in ``export_dir`` into ``root``, with its places moved there.

    ``for_boot``: the front's workers run as users that can reach the staged socket
    (nginx's as root when root; Apache's, never root, as www-data); otherwise the
    exported users are kept when they exist on this machine, so that the front's check
    checks them.
    """
    front: Front = get_front(layout.front)
    moved = {path: root / key for key, path in layout.machine_paths().items()}
    for path in moved.values():
        path.mkdir(parents=True, exist_ok=True)
    if layout.own_venv is None:  # this Python's environment stands in for the target's venv
        moved[layout.venv] = Path(sys.prefix)
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

    conf_dir = moved[layout.conf_dir]  # where the units expect the configs
    not_configs = {README, layout.app_unit, layout.front_unit, layout.sysctl_file}
    for path in export_dir.iterdir():  # the front's and the app server's configs, moved
        if path.name not in not_configs:
            text = move(path.read_text())
            if path.name == front.conf_name:
                text = front.stage_deploy(text, listen_port=listen_port, for_boot=for_boot)
            (conf_dir / path.name).write_text(text)
    front_conf = conf_dir / front.conf_name

    app_unit = export_dir / layout.app_unit
    hosted = not app_unit.exists()  # the front runs the app: its unit has the app's env
    unit = (export_dir / (layout.front_unit if hosted else layout.app_unit)).read_text()
    argv = None
    if not hosted:
        argv = _runnable_here(shlex.split(move(_unit_values(unit, "ExecStart")[0])), layout)
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
    address: tuple[str, int] | Path | None = None
    if not hosted:
        unix = f"unix:{moved[layout.app_run_dir]}" in front_conf.read_text()
        address = (
            moved[layout.app_run_dir] / layout.socket.name if unix else ("127.0.0.1", app_port)
        )
    return StagedDeploy(
        root, front, front_conf, conf_dir, argv, app_env, cwd, address,
        f"http://127.0.0.1:{listen_port}", str(own_python or sys.executable),
    )


def _runnable_here(argv: list[str], layout: DeployLayout) -> list[str]:
    """The unit's command, its venv already moved to this Python's environment (the app's
    own venv, measured here, runs as it is): its Python is this one, and a server's
    console script missing there runs as ``python -m``."""
    if layout.own_venv is not None:
        return argv
    venv_bin = Path(sys.prefix) / "bin"
    program = Path(argv[0])
    if program == venv_bin / "python":
        return [sys.executable, *argv[1:]]
    if program.parent == venv_bin:
        return argv if program.exists() else [sys.executable, "-m", program.name, *argv[1:]]
    raise ServelabError(
        f"the exported unit runs {argv[0]}, not a program of its venv",
        "this is a servelab bug; please report it",
    )


def check_export(
    export_dir: Path, layout: DeployLayout, server: AppServer, probe: RequestSpec
) -> list[str]:
    """Run every check on an exported set: the front's own check (nginx -t, apache2 -t),
    the server's, then boot it and send ``probe`` (the measured request, expecting the
    measured status); what was checked, one line each. ServelabError (one line) for the
    first that fails."""
    root = Path(tempfile.mkdtemp(prefix="servelab-check-", dir="/tmp"))
    # Traversable (not listable): a front whose workers run as another user (Apache's
    # www-data) reaches the staged socket and files in it.
    root.chmod(CHECK_ROOT_MODE)
    try:
        staged = stage(export_dir, layout, root / "check", for_boot=False)
        checks = [staged.front.check_deploy(staged.front_conf)]
        if staged.app_argv is not None:
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
        what = "app server" if booted.app_argv is not None else "app it runs"
        checks.append(
            f"booted: {probe.method} {probe.path} through the exported {staged.front.title} "
            f"and {what} answered HTTP {probe.expect_status}"
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
    """Run the staged app server and front until the block ends; yields the front's URL
    once ``probe`` gets its expected answer through both. Both are always stopped."""
    processes: dict[str, ManagedProcess] = {}
    front = staged.front
    try:
        if staged.app_argv is not None:
            processes["app"] = ManagedProcess(
                "app server", staged.app_argv, log_path=staged.root / "app.log",
                cwd=staged.app_cwd, env=staged.app_env,
            ).start()
            assert staged.app_address is not None
            wait_listening(staged.app_address, processes, timeout_s)
            front.before_start(staged.app_address, staged.root)
            env = {**os.environ, OWNER_ENV: str(os.getpid())}
        else:  # the front runs the app: the app's environment is its own
            env = staged.app_env
        role = front.role or front.kind
        processes[role] = ManagedProcess(
            role, front.command(staged.front_conf),
            log_path=staged.root / ("app.log" if staged.app_argv is None else f"{role}.out"),
            cwd=staged.app_cwd if staged.app_argv is None else staged.root, env=env,
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
