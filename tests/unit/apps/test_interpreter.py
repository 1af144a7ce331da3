"""Which Python runs the user's app, and the check that its servers are installed there."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from servelab.apps import app_environment
from servelab.apps import interpreter as interp
from servelab.apps.interpreter import (
    check_app_servers,
    find_app_python,
    install_fix,
    python_facts,
    with_app_python,
    with_app_pythons,
)
from servelab.config.stack import AppSpec, ServerSpec, StackSpec
from servelab.errors import SpecError


def _venv(root: Path, name: str = ".venv") -> Path:
    """A virtualenv-like directory whose bin/python links to this interpreter."""
    bin_dir = root / name / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    return python


def test_given_python_wins(tmp_path: Path) -> None:
    _venv(tmp_path)
    given = tmp_path / "other" / "python"
    found = find_app_python(AppSpec(ref="m:app", app_dir=tmp_path, python=given), {})
    assert found == (given, "")


@pytest.mark.parametrize("name", [".venv", "venv"])
def test_app_dir_venv_is_found(tmp_path: Path, name: str) -> None:
    python = _venv(tmp_path, name)
    assert find_app_python(AppSpec(ref="m:app", app_dir=tmp_path), {}) == (
        python, f"the app dir's {name}"
    )


@pytest.mark.parametrize("name", [".venv", "venv"])
def test_without_an_app_dir_the_working_directorys_venv_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """--app-dir defaults to the working directory, and so does the venv's place (issue
    26: `servelab study quick --app heroes:app` in the app's directory missed ./.venv)."""
    python = _venv(tmp_path, name)
    monkeypatch.chdir(tmp_path)
    assert find_app_python(AppSpec(ref="m:app"), {}) == (python, f"the app dir's {name}")
    settled, note = with_app_python(AppSpec(ref="m:app"), {})
    assert settled.python == python and f"found in the app dir's {name}" in note
    # an app dir given elsewhere wins over the working directory's venv
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert find_app_python(AppSpec(ref="m:app", app_dir=elsewhere), {}) == (None, "")
    monkeypatch.chdir(elsewhere)  # no venv here: nothing found, servelab's own
    assert find_app_python(AppSpec(ref="m:app"), {}) == (None, "")


def test_dot_venv_before_venv(tmp_path: Path) -> None:
    first = _venv(tmp_path, ".venv")
    _venv(tmp_path, "venv")
    assert find_app_python(AppSpec(ref="m:app", app_dir=tmp_path), {})[0] == first


def test_activated_virtualenv_is_used_when_the_app_dir_has_none(tmp_path: Path) -> None:
    python = _venv(tmp_path / "env")
    spec = AppSpec(ref="m:app", app_dir=tmp_path)
    assert find_app_python(spec, {"VIRTUAL_ENV": str(python.parent.parent)}) == (
        python, "$VIRTUAL_ENV"
    )


def test_servelabs_own_virtualenv_is_not_the_apps(tmp_path: Path) -> None:
    spec = AppSpec(ref="m:app", app_dir=tmp_path)
    assert find_app_python(spec, {"VIRTUAL_ENV": sys.prefix}) == (None, "")


def test_builtin_apps_run_with_servelabs_python(tmp_path: Path) -> None:
    _venv(tmp_path)
    assert find_app_python(AppSpec(ref="fastapi", app_dir=tmp_path), {}) == (None, "")
    with pytest.raises(SpecError, match="applies to your own app") as caught:
        find_app_python(AppSpec(ref="fastapi", python=tmp_path / "python"), {})
    assert "--app" in caught.value.fix


def test_an_experiment_whose_interpreters_are_settled_is_not_copied(monkeypatch) -> None:
    from servelab.config.experiment import Experiment

    experiment = Experiment.model_validate({
        "name": "t", "baseline": {}, "variants": [{"name": "v"}],
        "workloads": [{"name": "w", "load": {"duration_s": 4}}],
    })
    same, app, notes = with_app_pythons(experiment, None)
    assert same is experiment and app is None and notes == []
    found = Path("/elsewhere/bin/python")
    monkeypatch.setattr(
        interp, "with_app_python",
        lambda spec: (spec.model_copy(update={"python": found}), "app's Python: elsewhere"),
    )
    changed, _, notes = with_app_pythons(experiment, None)
    assert [s.app.python for s in changed.stacks] == [found, found]
    assert notes == ["app's Python: elsewhere"]  # said once for both


def test_settled_app_says_which_python_and_why(tmp_path: Path) -> None:
    python = _venv(tmp_path)
    settled, note = with_app_python(AppSpec(ref="m:app", app_dir=tmp_path), {})
    assert settled.python == python
    assert note.startswith(f"app's Python: {python} (Python {sys.version_info.major}.")
    assert "found in the app dir's .venv" in note
    own, said = with_app_python(AppSpec(ref="m:app", python=Path(sys.executable)), {})
    assert own.python is None and said == ""


def test_a_python_that_does_not_exist_or_run_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is not an executable file"):
        python_facts(str(tmp_path / "nope"))
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    broken.chmod(0o755)
    with pytest.raises(SpecError, match=r"did not run \(exit code 3\): boom"):
        python_facts(str(broken))


def test_facts_name_versions_of_installed_distributions_only() -> None:
    facts = python_facts(sys.executable, ("pydantic", "no-such-distribution-x", "nope|click"))
    assert facts.version == "{}.{}.{}".format(*sys.version_info[:3])
    assert facts.prefix == sys.prefix
    assert facts.packages["pydantic"]
    assert facts.packages["no-such-distribution-x"] is None
    assert facts.packages["nope|click"]  # either of the two


def test_install_fix_names_the_venvs_pip_or_servelabs_extra() -> None:
    venv_python = Path("/srv/app/.venv/bin/python")
    assert install_fix(venv_python, ["gunicorn", "pyuwsgi|uwsgi"], []) == (
        "/srv/app/.venv/bin/python -m pip install gunicorn pyuwsgi"
    )
    assert install_fix(None, ["granian"], ["servers"]).startswith(
        "pip install 'servelab[servers]'"
    )


def _stack(name: str, kind: str, python: Path | None = None, **server) -> StackSpec:
    return StackSpec(
        name=name, app=AppSpec(ref="m:app", python=python), server=ServerSpec(kind=kind, **server)
    )


def test_missing_server_packages_are_one_line_naming_variants_and_fix(monkeypatch) -> None:
    def facts(python, packages=()):
        versions = {name: None if "gunicorn" in name else "1.0" for name in packages}
        return interp.PythonFacts(python, "3.12.0", "/app/.venv", "/s", "/p", versions)

    monkeypatch.setattr(interp, "python_facts", facts)
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
        return interp.PythonFacts(python, "3.11.0", sys.prefix, "/s", "/p",
                                  dict.fromkeys(packages))

    monkeypatch.setattr(interp, "python_facts", facts)
    with pytest.raises(SpecError, match="granian not installed in servelab's Python") as caught:
        check_app_servers([_stack("g", "granian")])
    assert "servelab[servers]" in caught.value.fix


def test_only_servelabs_own_python_gets_servelabs_package_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servelab.apps import SERVELAB_ROOT

    # The caller's PYTHONPATH is kept (it may name servelab's src, as in a worktree run).
    monkeypatch.delenv("PYTHONPATH", raising=False)
    own = app_environment({}, tmp_path)["PYTHONPATH"].split(":")
    assert own[0] == str(tmp_path) and own[-1] == str(SERVELAB_ROOT)
    theirs = app_environment({}, tmp_path, Path("/app/.venv/bin/python"))
    assert str(SERVELAB_ROOT) not in theirs["PYTHONPATH"].split(":")
