"""Before a stack launches: is its app server installed in its app's Python (checked once
per interpreter, for every variant), and the environment record's description of each app
Python. Above the plug-ins: each server says which distributions it needs."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from servelab.apps import resolve_app
from servelab.apps.interpreter import builtin, own_python, python_facts
from servelab.config.experiment import Experiment
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.plugins.server import get_server


def install_fix(python: Path | None, missing: Iterable[str], extras: Iterable[str]) -> str:
    """How to install ``missing`` distributions: into the app's venv with its own pip,
    or servelab's extras into servelab's."""
    names = " ".join(name.split("|")[0] for name in missing)
    if python is not None:
        return f"{python} -m pip install {names}"
    wanted = sorted(set(extras))
    if wanted:
        from servelab.host.parts import part_with_extra, setup_command

        parts = sorted({part_with_extra(extra) for extra in wanted})
        return " && ".join(setup_command(part) for part in parts)
    return f"pip install {names} into servelab's environment"


def check_app_servers(stacks: Iterable[StackSpec]) -> list[dict[str, Any]]:
    """SpecError (one line) unless every stack's app server can run with its app's
    Python; else what each app Python is, for the environment record."""
    needs: dict[Path | None, dict[str, list[str]]] = {}  # python -> distribution -> variants
    extras: dict[str, str] = {}  # distribution -> the servelab extra that installs it
    for stack in stacks:
        server = get_server(stack.server.kind)
        for name in server.needs(stack.server):
            needs.setdefault(stack.app.python, {}).setdefault(name, []).append(stack.name)
            if server.extra:
                extras[name] = server.extra
    described = []
    for python, wanted in needs.items():
        facts = python_facts(str(python or own_python()), tuple(sorted(wanted)))
        missing = [name for name in sorted(wanted) if facts.packages.get(name) is None]
        if missing:
            where = "servelab's Python" if python is None else f"the app's Python {python}"
            variants = sorted({v for name in missing for v in wanted[name]})
            raise SpecError(
                f"{', '.join(n.split('|')[0] for n in missing)} not installed in {where} "
                f"(needed by {', '.join(variants)})",
                install_fix(python, missing, (extras[n] for n in missing if n in extras)),
            )
        described.append(
            {"path": facts.path, "version": facts.version,
             "packages": {n.split("|")[0]: v for n, v in facts.packages.items()}}
        )
    return described


def app_pythons(experiment: Experiment) -> list[dict[str, Any]]:
    """The environment record's "app_python": per interpreter, its path, version and the
    versions of the app servers used and of the web frameworks the app imported.

    SpecError (one line) when a variant's server is not installed there."""
    described = check_app_servers(experiment.stacks)
    frameworks: dict[str, dict[str, str]] = {}
    for stack in experiment.stacks:
        if not builtin(stack.app):
            found = dict(resolve_app(stack.app).frameworks)
            frameworks.setdefault(str(stack.app.python or own_python()), {}).update(found)
    for entry in described:
        entry["frameworks"] = frameworks.get(entry["path"], {})
    return described
