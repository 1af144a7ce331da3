"""The app's own Python: which interpreter runs the user's app and its app servers.

A project has its own virtualenv with its own pins; measuring the app with servelab's
interpreter would make servelab's pins the app's. So the user's app (``--app``) and
every Python app server serving it run with the app's interpreter: ``--python``, else
the nearest ``.venv``/``venv`` from the app dir up to its project's root, else the
working directory's, else an activated ``$VIRTUAL_ENV``, else servelab's own. An
environment on disk beats an activated one, as in uv's project commands (a shell's
activation outlives a ``cd`` to another project): the note says which one was passed
over. nginx, Apache and the load drivers stay servelab's; the built-in apps run with
servelab's Python (they import servelab). Before anything starts, the server packages
each variant needs are checked in that interpreter, and a missing one is one line
saying what to install (servelab never installs into the user's venv).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from servelab.config.experiment import Experiment
from servelab.config.stack import AppSpec
from servelab.errors import SpecError

# The directories of an app dir that hold its virtualenv, in the order looked for.
VENV_DIRS = (".venv", "venv")
# A directory holding one of these is a project's root; one holding .git a checkout's.
PROJECT_FILES = ("pyproject.toml", "setup.cfg")
_PYTHON_FIX = "give the app's interpreter, e.g. --python /path/to/project/.venv/bin/python"


def own_python() -> Path:
    """servelab's interpreter (as invoked: a venv's bin/python, not the file it links to)."""
    return Path(sys.executable)


def is_own(python: Path | None) -> bool:
    return python is None or Path(os.path.abspath(python)) == own_python()


def builtin(app: AppSpec) -> bool:
    from servelab.apps import BUILTIN_APPS

    return app.ref.strip() in BUILTIN_APPS or app.ref.strip() in BUILTIN_APPS.values()


def find_app_python(
    app: AppSpec, environ: Mapping[str, str] = os.environ
) -> tuple[Path | None, str]:
    """The interpreter for ``app`` (None: servelab's own) and where it was found ('' for
    servelab's own or one given in the spec): its venv (``find_venv``), else the one
    ``$VIRTUAL_ENV`` names. Without an app dir the search starts in the working
    directory, as the app dir defaults to it."""
    if app.python is not None:
        if builtin(app) and not is_own(app.python):
            raise SpecError(
                f"--python {app.python} applies to your own app (--app); the built-in app "
                f"{app.ref!r} runs with servelab's Python",
                "add --app package.module:attr, or leave out --python",
            )
        return Path(os.path.abspath(app.python.expanduser())), ""
    if builtin(app):
        return None, ""
    # The app dir defaults to the working directory (where the app servers run), and so
    # does the place its venv is looked for.
    cwd = Path.cwd()
    app_dir = Path(os.path.abspath(app.app_dir.expanduser())) if app.app_dir is not None else cwd
    found = find_venv(app_dir, cwd)
    if found is not None:
        return found
    active = active_python(environ)
    return (active, "$VIRTUAL_ENV") if active is not None else (None, "")


def project_dirs(app_dir: Path) -> list[Path]:
    """``app_dir`` (absolute) and its parents up to its project's root, nearest first: up
    to the root of the git checkout holding it (a workspace's members share the root's
    venv, as in a uv workspace), else up to the nearest directory with a
    ``pyproject.toml`` or ``setup.cfg``; ``app_dir`` alone outside any project."""
    chain = [app_dir, *app_dir.parents]
    for markers in ((".git",), PROJECT_FILES):
        for depth, folder in enumerate(chain):
            if any((folder / marker).exists() for marker in markers):
                return chain[: depth + 1]
    return chain[:1]


def _said(folder: Path, app_dir: Path, name: str) -> str:
    """Where the venv ``name`` found in ``folder`` (one of ``project_dirs(app_dir)``) is,
    as the note says it."""
    if folder == app_dir:
        return f"the app dir's {name}"
    if any((folder / marker).exists() for marker in PROJECT_FILES):
        return f"the project's {name}"
    if (folder / ".git").exists():
        return f"the repository's {name}"
    return f"{name} above the app dir"


def find_venv(app_dir: Path, cwd: Path) -> tuple[Path, str] | None:
    """The python of the nearest venv (``VENV_DIRS``) from absolute ``app_dir`` up to its
    project's root (``project_dirs``), else in ``cwd``; with where it was found."""
    folders = project_dirs(app_dir)
    for folder in [*folders, *([] if cwd in folders else [cwd])]:
        for name in VENV_DIRS:
            python = folder / name / "bin" / "python"
            # servelab's own venv (run from its checkout) is not the app's: the search
            # goes on, to $VIRTUAL_ENV, then to servelab's own Python all the same.
            if python.is_file() and not is_own(python):
                if folder not in folders:
                    return python, f"the working directory's {name}"
                return python, _said(folder, app_dir, name)
    return None


def active_python(environ: Mapping[str, str]) -> Path | None:
    """The python of the virtualenv ``$VIRTUAL_ENV`` names (an activated venv's, or the
    project's under ``uv run`` or ``poetry run``), unless it is servelab's own."""
    venv = environ.get("VIRTUAL_ENV")
    if not venv:
        return None
    python = Path(venv).absolute() / "bin" / "python"
    return python if python.is_file() and not is_own(python) else None


def with_app_python(app: AppSpec, environ: Mapping[str, str] = os.environ) -> tuple[AppSpec, str]:
    """``app`` with its interpreter settled (checked to run), and a note saying which one
    and why ('' when it is servelab's own)."""
    python, origin = find_app_python(app, environ)
    if python is None or is_own(python):
        return app.model_copy(update={"python": None}), ""
    facts = python_facts(str(python))
    active = active_python(environ) if origin not in ("", "$VIRTUAL_ENV") else None
    passed_over = f" rather than $VIRTUAL_ENV's {active}" if active not in (None, python) else ""
    return app.model_copy(update={"python": python}), (
        f"app's Python: {python} (Python {facts.version}"
        + (f", found in {origin}{passed_over}; --python to choose another" if origin else "")
        + ")"
    )


@dataclass(frozen=True)
class PythonFacts:
    """What an interpreter is, and which of the asked-for distributions it has."""

    path: str
    version: str
    prefix: str
    stdlib: str  # sysconfig's paths: what mod_wsgi's daemons must be able to read
    purelib: str
    packages: Mapping[str, str | None]  # asked-for name ("a|b": either) -> version, or None


# Runs in the app's interpreter: argv = distribution names, "a|b" for either.
_QUERY_SCRIPT = r"""
import json, sys, sysconfig
from importlib import metadata

def version(names):
    for name in names.split("|"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return None

print(json.dumps({"version": "%d.%d.%d" % tuple(sys.version_info[:3]), "prefix": sys.prefix,
                  "stdlib": sysconfig.get_path("stdlib"), "purelib": sysconfig.get_path("purelib"),
                  "packages": {name: version(name) for name in sys.argv[1:]}}))
"""


@functools.lru_cache(maxsize=64)
def python_facts(python: str, packages: tuple[str, ...] = ()) -> PythonFacts:
    """Ask ``python`` its version, prefix and the versions of ``packages``.

    SpecError (one line) when it does not exist or does not run."""
    path = Path(python)
    if not path.is_file() or not os.access(path, os.X_OK):
        raise SpecError(f"the app's Python {python} is not an executable file", _PYTHON_FIX)
    try:
        done = subprocess.run(
            [python, "-c", _QUERY_SCRIPT, *packages],
            capture_output=True, text=True, errors="replace", timeout=60,
            stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": ""},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError(f"the app's Python {python} did not run: {exc}", _PYTHON_FIX) from None
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        said = " ".join(done.stderr.split()[-20:])
        raise SpecError(
            f"the app's Python {python} did not run (exit code {done.returncode})"
            + (f": {said}" if said else ""),
            _PYTHON_FIX,
        ) from None
    major, minor = (int(part) for part in found["version"].split(".")[:2])
    if (major, minor) < (3, 8):
        raise SpecError(
            f"the app's Python {python} is Python {found['version']}; the app servers need "
            "3.8 or newer",
            _PYTHON_FIX,
        )
    return PythonFacts(
        python, found["version"], found["prefix"], found["stdlib"], found["purelib"],
        found["packages"],
    )


def with_app_pythons(
    experiment: Experiment, app: AppSpec | None
) -> tuple[Experiment, AppSpec | None, list[str]]:
    """``experiment`` and the user's ``app`` (--app) with their interpreters settled, and
    what was found (said once per interpreter)."""
    notes: dict[str, None] = {}
    settled: dict[str, AppSpec] = {}

    def settle(spec: AppSpec) -> AppSpec:
        key = spec.model_dump_json()
        if key not in settled:
            settled[key], note = with_app_python(spec)
            if note:
                notes[note] = None
        return settled[key]

    if app is not None:
        app = settle(app)
    stacks = [
        s if settle(s.app) == s.app else s.model_copy(update={"app": settle(s.app)})
        for s in experiment.stacks
    ]
    if all(new is old for new, old in zip(stacks, experiment.stacks, strict=True)):
        return experiment, app, list(notes)  # every app's interpreter was settled already
    return experiment.with_stacks(stacks), app, list(notes)
