"""The apps servelab can serve: built-in reference apps, or the user's own by import path.

``resolve_app`` imports the app in a separate Python process, so a broken or
slow-to-import user app can neither crash nor pollute servelab, and reports
whether it speaks ASGI or WSGI (which decides the server flags to use).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from servelab.errors import SpecError

if TYPE_CHECKING:  # an app server's worker imports this package: no pydantic for it
    from servelab.config.stack import AppSpec

Interface = Literal["asgi", "wsgi"]

BUILTIN_APPS: dict[str, str] = {
    "fastapi": "servelab.apps.seed_fastapi:app",
    "sleepy": "servelab.apps.sleepy_wsgi:app",
    # Its database comes from the environment (servelab.apps.django_app.settings).
    "django": "servelab.apps.django_app.wsgi:application",
}
# Known, so launching a built-in app does not pay for an extra import process.
_BUILTIN_INTERFACES: dict[str, Interface] = {"fastapi": "asgi", "sleepy": "wsgi", "django": "wsgi"}

# gunicorn accepts ``module:name`` and ``module:name()``; uvicorn ``module:name``
# (``--factory`` for the call). Only what both understand is accepted.
_IMPORT_PATH = re.compile(
    r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<attr>[A-Za-z_]\w*)(?P<call>\(\))?"
)
_MARK = "__servelab_resolved_app__ "
# The directory that holds the ``servelab`` package, so built-in apps import in
# server processes even when servelab runs from a source checkout.
SERVELAB_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ResolvedApp:
    """An app checked to import, and how servers must load it."""

    import_path: str  # "package.module:attr", without "()" even for a factory
    interface: Interface
    app_dir: Path | None  # absolute; cwd and first sys.path entry of the server
    is_factory: bool  # attr is called with no arguments to build the app
    # The interpreter of the app and its servers (servelab.apps.interpreter); None:
    # servelab's own.
    python: Path | None = None
    # The web frameworks the app imported, with their versions: (("flask", "3.1.0"),).
    frameworks: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def gunicorn_target(self) -> str:
        return f"{self.import_path}()" if self.is_factory else self.import_path

    @property
    def interpreter(self) -> str:
        """The Python that runs it: the app's own, or servelab's."""
        return str(self.python or sys.executable)


def app_environment(
    env: Mapping[str, str], app_dir: Path | None, python: Path | None = None
) -> dict[str, str]:
    """os.environ plus the app's ``env``, with app_dir first on PYTHONPATH.

    With servelab's own Python (``python`` None) servelab's package directory follows, so
    that built-in apps import from a checkout; never with the app's own Python, whose
    packages must not be shadowed by servelab's."""
    merged = {**os.environ, **env}
    parts = [str(app_dir)] if app_dir is not None else []
    if merged.get("PYTHONPATH"):
        parts.append(merged["PYTHONPATH"])
    if python is None:
        parts.append(str(SERVELAB_ROOT))
    if parts:
        merged["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        merged.pop("PYTHONPATH", None)
    return merged


def resolve_app(spec: AppSpec, *, timeout_s: float = 60.0) -> ResolvedApp:
    """Check that ``spec`` names an importable ASGI or WSGI app; say which.

    Raises SpecError (the app's own error on one line, its traceback tail as
    ``detail``) when the path is malformed, the import fails or the object is
    not an app.
    """
    ref = spec.ref.strip()
    import_path = BUILTIN_APPS.get(ref, ref)
    match = _IMPORT_PATH.fullmatch(import_path)
    if match is None:
        raise SpecError(
            f"app {ref!r} is neither a built-in app nor a valid import path",
            "expected package.module:attr (or package.module:factory() for an app factory); "
            f"built-in apps: {', '.join(BUILTIN_APPS)}",
        )
    app_dir = None
    if spec.app_dir is not None:
        app_dir = spec.app_dir.expanduser().resolve()
        if not app_dir.is_dir():
            raise SpecError(
                f"app_dir {spec.app_dir} is not a directory",
                "give the directory that contains the app's top-level package",
            )
    path = f"{match['module']}:{match['attr']}"
    explicit_factory = match["call"] is not None
    if ref in _BUILTIN_INTERFACES:
        return ResolvedApp(path, _BUILTIN_INTERFACES[ref], app_dir, is_factory=False)
    python = Path(os.path.abspath(spec.python)) if spec.python is not None else None
    found = _probe_in_subprocess(path, explicit_factory, spec.env, app_dir, python, timeout_s)
    return ResolvedApp(
        path, found["interface"], app_dir, is_factory=found["is_factory"], python=python,
        frameworks=tuple(sorted(found.get("frameworks", {}).items())),
    )


def _probe_in_subprocess(
    path: str,
    explicit_factory: bool,
    env: Mapping[str, str],
    app_dir: Path | None,
    python: Path | None,
    timeout_s: float,
) -> dict[str, Any]:
    interpreter = str(python or sys.executable)
    fix = (
        f"check the import path, app_dir and that the app's dependencies are installed "
        f"for {interpreter}" + ("" if python else " (or name the app's own with --python)")
    )
    argv = [interpreter, "-c", _PROBE_SCRIPT, path, "1" if explicit_factory else "0"]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            cwd=app_dir,
            env=app_environment(env, app_dir, python),
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise SpecError(f"importing app {path!r} took more than {timeout_s:g} s", fix) from None
    except OSError as exc:
        raise SpecError(f"cannot run {interpreter}: {exc.strerror or exc}", fix) from None
    result: dict[str, Any] | None = None
    for line in done.stdout.splitlines():
        if line.startswith(_MARK):
            result = json.loads(line[len(_MARK) :])
    if result is None:
        stderr_tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise SpecError(
            f"importing app {path!r} ended the process (exit code {done.returncode}) "
            "before servelab could inspect it",
            fix,
            detail=stderr_tail,
        )
    if "error" in result:
        raise SpecError(
            f"cannot use app {path!r}: {result['error']}",
            str(result.get("fix") or fix),
            detail=str(result["traceback"]),
        )
    return result


# Runs in a fresh interpreter: argv = [import path, "1" if explicitly a factory].
# Prints one marker line with JSON: {"interface", "is_factory"} or {"error", "traceback"}.
_PROBE_SCRIPT = r"""
import importlib, inspect, json, sys, traceback

MARK = __MARK__
# Web frameworks whose version the record names, when the app imported them.
FRAMEWORKS = ("django", "flask", "fastapi", "starlette", "litestar", "quart", "sanic",
              "falcon", "bottle", "pyramid", "aiohttp", "tornado", "werkzeug")


def emit(**fields):
    sys.stdout.flush()
    sys.__stdout__.write("\n" + MARK + json.dumps(fields) + "\n")
    sys.__stdout__.flush()


def one_line(exc):
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def fail(message):
    tb = "".join(traceback.format_exc()).strip().splitlines()
    emit(error=message, traceback="\n".join(tb[-12:]))
    sys.exit(1)


def positional(obj):
    "(required, total) positional parameters, or None if unknown or *args."
    try:
        params = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return sum(p.default is p.empty for p in pos), len(pos)


def interface(obj):
    if inspect.isclass(obj) or not callable(obj):
        return None
    call = obj if inspect.isroutine(obj) else getattr(type(obj), "__call__", None)
    if inspect.iscoroutinefunction(obj) or inspect.iscoroutinefunction(call):
        return "asgi"
    counts = positional(obj)
    if counts is not None and counts[0] <= 2 <= counts[1]:
        return "wsgi"
    if counts is not None and counts[0] <= 3 <= counts[1]:
        return "asgi"
    return None


path, explicit = sys.argv[1], sys.argv[2] == "1"
module_name, attr = path.split(":")
try:
    module = importlib.import_module(module_name)
except BaseException as exc:
    fail(one_line(exc))
try:
    obj = getattr(module, attr)
except AttributeError:
    emit(error=f"module {module_name!r} has no attribute {attr!r}", traceback="")
    sys.exit(1)

kind = None if explicit else interface(obj)
factory = explicit
if kind is None and not explicit and inspect.isroutine(obj):
    counts = positional(obj)
    factory = counts is not None and counts[0] == 0
if factory:
    try:
        obj = obj()
    except BaseException as exc:
        fail(f"calling the factory {attr}() failed: {one_line(exc)}")
    kind = interface(obj)
if kind is None and not factory and inspect.isroutine(obj):
    counts = positional(obj)
    if counts is not None and counts[0] not in (2, 3):
        needs = ", ".join(list(inspect.signature(obj).parameters)[:counts[0]])
        emit(error=f"{attr}({needs}) looks like an app factory that needs {counts[0]} "
                   "argument(s); servelab calls a factory with none", traceback="",
             fix=f"give {needs} a default, or point --app at a zero-argument factory or the "
                 "app object")
        sys.exit(1)
if kind is None:
    what = f"{attr}() returned {type(obj).__name__!r}" if factory else (
        f"{attr} is {type(obj).__name__!r}")
    emit(error=f"{what}, which is neither an ASGI app (async (scope, receive, send)) "
               "nor a WSGI app ((environ, start_response))", traceback="")
    sys.exit(1)

def frameworks():
    try:
        from importlib import metadata
    except ImportError:
        return {}
    found = {}
    for name in FRAMEWORKS:
        if name in sys.modules:
            try:
                found[name] = metadata.version(name)
            except Exception:
                found[name] = "unknown"
    return found


emit(interface=kind, is_factory=factory, frameworks=frameworks())
""".replace("__MARK__", repr(_MARK))
