"""The check that each variant's app server is installed in its app's Python."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from servelab.apps.interpreter import PythonFacts
from servelab.config.stack import AppSpec, ServerSpec, StackSpec
from servelab.errors import SpecError
from servelab.launch import app_python
from servelab.launch.app_python import check_app_servers, install_fix


def test_install_fix_names_the_venvs_pip_or_servelabs_extra() -> None:
    venv_python = Path("/srv/app/.venv/bin/python")
    assert install_fix(venv_python, ["gunicorn", "pyuwsgi|uwsgi"], []) == (
        "/srv/app/.venv/bin/python -m pip install gunicorn pyuwsgi"
    )
    assert install_fix(None, ["granian"], ["servers"]) == "servelab setup --with servers"
    assert install_fix(None, ["mod_wsgi", "pyuwsgi"], ["apache", "uwsgi"]) == (
        "servelab setup --with apache && servelab setup --with servers"
    )


def _stack(name: str, kind: str, python: Path | None = None, **server) -> StackSpec:
    return StackSpec(
        name=name, app=AppSpec(ref="m:app", python=python), server=ServerSpec(kind=kind, **server)
    )


def test_missing_server_packages_are_one_line_naming_variants_and_fix(monkeypatch) -> None:
    def facts(python, packages=()):
        versions = {name: None if "gunicorn" in name else "1.0" for name in packages}
        return PythonFacts(python, "3.12.0", "/app/.venv", "/s", "/p", versions)

    monkeypatch.setattr(app_python, "python_facts", facts)
    venv = Path("/app/.venv/bin/python")
    stacks = [
        _stack("a", "gunicorn", venv), _stack("b", "gunicorn", venv, worker_class="gthread"),
        _stack("c", "uvicorn", venv),
    ]
    with pytest.raises(SpecError) as caught:
        check_app_servers(stacks)
    assert caught.value.problem == (
        "gunicorn not installed in the app's Python /app/.venv/bin/python (needed by a, b)"
    )
    assert caught.value.fix == "/app/.venv/bin/python -m pip install gunicorn"
    # Without gunicorn the uvicorn variant alone is fine, and described for the record.
    assert check_app_servers([stacks[2]]) == [
        {"path": str(venv), "version": "3.12.0", "packages": {"uvicorn": "1.0"}}
    ]


def test_a_missing_server_in_servelabs_python_names_its_extra(monkeypatch) -> None:
    def facts(python, packages=()):
        return PythonFacts(python, "3.11.0", sys.prefix, "/s", "/p",
                                  dict.fromkeys(packages))

    monkeypatch.setattr(app_python, "python_facts", facts)
    with pytest.raises(SpecError, match="granian not installed in servelab's Python") as caught:
        check_app_servers([_stack("g", "granian")])
    assert caught.value.fix == "servelab setup --with servers"
