"""mod_wsgi as the app server: Apache runs the (WSGI) app itself, in daemon processes.

The module is the PyPI build in servelab's venv (``mod_wsgi.express``), built against
the project's Python; Apache (``servelab.fronts.apache``) loads it and writes the
WSGIDaemonProcess line from :func:`wsgi_settings`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from servelab.apps import ResolvedApp
from servelab.apps.interpreter import python_facts
from servelab.config.stack import ServerSpec
from servelab.errors import MissingToolError, StackStartError
from servelab.host.doctor import Check
from servelab.host.environment import package_version
from servelab.servers.base import AppServer, Command, Listen

SCRIPT_NAME = "app.wsgi"
MOD_WSGI_FIX = "scripts/setup.sh --with apache (pip install 'servelab[apache]'; needs apache2-dev)"


def mod_wsgi_module(python: Path | None = None) -> Path:
    """The mod_wsgi module built against ``python`` (None: servelab's own)."""
    if python is not None:
        done = subprocess.run(
            [str(python), "-c", "from mod_wsgi.express.platform import MOD_WSGI_SO as m; print(m)"],
            capture_output=True, text=True, errors="replace", timeout=60,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            raise MissingToolError(
                f"mod_wsgi is not installed in the app's Python {python}",
                f"{python} -m pip install mod_wsgi (it needs apache2-dev's apxs)",
            )
        path = Path(done.stdout.strip())
    else:
        try:
            from mod_wsgi.express.platform import MOD_WSGI_SO  # type: ignore[import-untyped]
        except ImportError:
            raise MissingToolError(
                "mod_wsgi is not installed in servelab's venv", MOD_WSGI_FIX
            ) from None
        path = Path(MOD_WSGI_SO)
    if not path.is_file():
        raise MissingToolError(f"mod_wsgi's Apache module {path} is missing", MOD_WSGI_FIX)
    return path


def wsgi_settings(
    server: ServerSpec, app: ResolvedApp, workdir: Path, python_path: list[Path]
) -> dict[str, object]:
    """What the WSGIDaemonProcess line needs (see httpd.conf.j2)."""
    return {
        "processes": server.workers,
        "threads": server.threads,
        # The app's venv (or servelab's), as mod_wsgi-express module-config would say.
        "python_home": Path(python_facts(app.interpreter).prefix) if app.python else Path(
            sys.prefix
        ),
        "python_path": ":".join(str(p) for p in python_path),
        "home": app.app_dir or python_path[-1],
        "backlog": server.backlog,
        "request_timeout": server.timeout_s,
        "maximum_requests": server.max_requests,
        "script": workdir / SCRIPT_NAME,
    }


def wsgi_script(app: ResolvedApp) -> str:
    """The script mod_wsgi loads: it imports the app (calling a factory) as ``application``."""
    module, _, attr = app.import_path.partition(":")
    call = "()" if app.is_factory else ""
    return (
        "# Written by servelab: mod_wsgi serves `application` from this file.\n"
        "import importlib\n\n"
        f"application = getattr(importlib.import_module({module!r}), {attr!r}){call}\n"
    )



class ModWsgi(AppServer):
    kind = "mod_wsgi"
    interfaces = frozenset({"wsgi"})
    knobs = frozenset({"threads", "max_requests"})
    inside_front = "apache"
    packages = ("mod_wsgi",)
    extra = "apache"

    def command(
        self, server: ServerSpec, app: ResolvedApp, listen: Listen, workdir: Path,
        stack_name: str = "stack",
    ) -> Command:
        raise TypeError("mod_wsgi runs inside Apache: the apache front starts it")

    def describe(self, server: ServerSpec) -> str:
        return f"mod_wsgi daemon processes={server.workers} threads={server.threads}"

    def doctor_checks(self) -> list[Check]:
        """Optional: only server kind 'mod_wsgi' needs it."""
        from servelab.fronts import apache

        name = "mod_wsgi (server kind 'mod_wsgi')"
        try:
            module = mod_wsgi_module()
        except MissingToolError as exc:
            return [Check(name, "warn", "not found", exc.fix)]
        try:  # its daemons run as www-data (when root): can they read the project's Python?
            apache.check_daemon_access(apache.run_as(), apache.python_paths())
        except (MissingToolError, StackStartError) as exc:
            return [Check(name, "warn", exc.problem, exc.fix)]
        return [Check(name, "ok", f"{package_version('mod_wsgi') or 'found'} ({module.name})")]
