"""mod_wsgi as the app server: Apache runs the (WSGI) app itself, in daemon processes.

The module is the PyPI build in servelab's venv (``mod_wsgi.express``), built against
the project's Python. The front it runs inside (``inside_front``) is asked by name, never
imported: the launcher hands the front what :meth:`ModWsgi.hosting` says (the
WSGIDaemonProcess line's settings, the module to load), as an export hands it
``ServerDeploy.hosted``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from servelab.apps import SERVELAB_ROOT, ResolvedApp
from servelab.apps.interpreter import python_facts
from servelab.config.stack import ServerSpec, StackSpec
from servelab.errors import MissingToolError, StackStartError
from servelab.host.doctor import Check
from servelab.host.facts import package_version
from servelab.plugins.front import get_front
from servelab.plugins.server import AppServer, Command, DeployTarget, Listen, ServerDeploy

SCRIPT_NAME = "app.wsgi"
MOD_WSGI_FIX = "servelab setup --with apache (it builds mod_wsgi against apache2-dev)"


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


def _daemons(server: ServerSpec) -> dict[str, object]:
    """What the WSGIDaemonProcess line says of the daemon processes (see httpd.conf.j2)."""
    return {
        "processes": server.workers,
        "threads": server.threads,
        "backlog": server.backlog,
        "request_timeout": server.timeout_s,
        "maximum_requests": server.max_requests,
    }


def wsgi_settings(
    server: ServerSpec, app: ResolvedApp, workdir: Path, python_path: list[Path], module: Path
) -> dict[str, object]:
    """What the WSGIDaemonProcess line needs (see httpd.conf.j2), and the mod_wsgi
    ``module`` to load."""
    return {
        **_daemons(server),
        "group": "servelab",  # the daemon process group's name
        "user": None,  # Apache's children's (when root)
        # The app's venv (or servelab's), as mod_wsgi-express module-config would say.
        "python_home": _prefix(app.python),
        "python_path": ":".join(str(p) for p in python_path),
        "home": app.app_dir or python_path[-1],
        "script": workdir / SCRIPT_NAME,
        "module": module,
    }


def _prefix(python: Path | None) -> Path:
    """The environment (sys.prefix) of the app's Python (None: servelab's)."""
    return Path(python_facts(str(python)).prefix) if python else Path(sys.prefix)


def wsgi_script(target: str) -> str:
    """The script mod_wsgi loads: it imports the app ``target`` ("module:attr", a factory
    "module:attr()" called) as ``application``."""
    module, _, attr = target.partition(":")
    call = "()" if attr.endswith("()") else ""
    return (
        "# Written by servelab: mod_wsgi serves `application` from this file.\n"
        "import importlib\n\n"
        f"application = getattr(importlib.import_module({module!r}), {attr.removesuffix('()')!r})"
        f"{call}\n"
    )


class ModWsgi(AppServer):
    kind = "mod_wsgi"
    interfaces = frozenset({"wsgi"})
    knobs = frozenset({"threads", "max_requests"})
    inside_front = "apache"
    ends_slow_requests = True  # request-timeout: the daemon process is restarted
    packages = ("mod_wsgi",)
    extra = "apache"

    def command(
        self, server: ServerSpec, app: ResolvedApp, listen: Listen, workdir: Path,
        stack_name: str = "stack",
    ) -> Command:
        raise TypeError("mod_wsgi runs inside Apache: the apache front starts it")

    def describe(self, server: ServerSpec) -> str:
        return f"mod_wsgi daemon processes={server.workers} threads={server.threads}"

    def hosting(
        self, server: ServerSpec, app: ResolvedApp, workdir: Path
    ) -> Mapping[str, object]:
        """The app's script written into ``workdir``, and the daemon settings Apache's
        config says (its python-path: the app's directory, or servelab's own root for a
        built-in app, which imports servelab)."""
        own_root = SERVELAB_ROOT if app.python is None else None
        python_path = [p for p in (app.app_dir, own_root) if p is not None]
        script = workdir / SCRIPT_NAME
        script.write_text(wsgi_script(app.gunicorn_target))
        script.chmod(0o644)  # read by the daemons, which run as Apache's children's user
        return wsgi_settings(server, app, workdir, python_path, mod_wsgi_module(app.python))

    def deploy(self, stack: StackSpec, target: DeployTarget) -> ServerDeploy:
        """The app's script and the daemon settings its front's config says (no process of
        its own: Apache runs it)."""
        server = stack.server
        module = mod_wsgi_module(stack.app.python)  # as measured, in the target's venv
        prefix = _prefix(stack.app.python)
        if module.is_relative_to(prefix):  # else: not in the measured venv, named as it is
            module = target.venv / module.relative_to(prefix)
        hosted = {
            **_daemons(server),
            "group": target.name,
            "user": target.name,  # the app's own user, as the other servers' units say
            "python_home": target.venv,
            "python_path": str(target.app_dir),
            "home": target.app_dir,
            "script": target.conf_dir / SCRIPT_NAME,
            "module": module,
        }
        recycle = (
            f", each restarted after {server.max_requests} requests"
            if server.max_requests else ""
        )
        return ServerDeploy(
            exec_start=[],
            summary=(
                f"mod_wsgi in daemon mode, {server.workers} processes × {server.threads} "
                f"threads{recycle}"
            ),
            timeout=(
                f"mod_wsgi restarts a daemon process whose requests run longer than "
                f"{server.timeout_s} s (`request-timeout`); "
                f"{target.front_waits(stack.proxy.timeout_s)}, so a stuck request is ended by "
                f"mod_wsgi, not left running after {target.front} gave up."
            ),
            packages=("mod_wsgi",),
            files={SCRIPT_NAME: wsgi_script(target.app)},
            file_roles={SCRIPT_NAME: "the WSGI script mod_wsgi loads: it imports the app"},
            app_named_in=f"{SCRIPT_NAME}",
            hosted=hosted,
            notes=(
                "mod_wsgi is the PyPI build (`pip install mod_wsgi`, which needs apache2-dev "
                f"to compile), loaded from the venv ({module}); the venv's Python must be the "
                "one it was built against",
            ),
        )

    def doctor_checks(self) -> list[Check]:
        """Optional: only server kind 'mod_wsgi' needs it."""
        name = "mod_wsgi (server kind 'mod_wsgi')"
        try:
            module = mod_wsgi_module()
        except MissingToolError as exc:
            return [Check(name, "warn", "not found", exc.fix)]
        try:  # its daemons run as www-data (when root): can they read the project's Python?
            get_front(self.inside_front or "").check_hosted_access()
        except (MissingToolError, StackStartError) as exc:
            return [Check(name, "warn", exc.problem, exc.fix)]
        return [Check(name, "ok", f"{package_version('mod_wsgi') or 'found'} ({module.name})")]
