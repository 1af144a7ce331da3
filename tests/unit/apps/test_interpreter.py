"""Which Python runs the user's app."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from servelab.apps import app_environment
from servelab.apps import interpreter as interp
from servelab.apps.interpreter import (
    find_app_python,
    find_venv,
    project_dirs,
    python_facts,
    with_app_python,
    with_app_pythons,
)
from servelab.config.stack import AppSpec
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
    # an app dir elsewhere without a venv: the working directory's is the next place
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert find_app_python(AppSpec(ref="m:app", app_dir=elsewhere), {}) == (
        python, f"the working directory's {name}"
    )
    monkeypatch.chdir(elsewhere)  # no venv here: nothing found, servelab's own
    assert find_app_python(AppSpec(ref="m:app"), {}) == (None, "")


def test_dot_venv_before_venv(tmp_path: Path) -> None:
    first = _venv(tmp_path, ".venv")
    _venv(tmp_path, "venv")
    assert find_app_python(AppSpec(ref="m:app", app_dir=tmp_path), {})[0] == first


def _tree(root: Path, *names: str) -> Path:
    """``root`` with the files ``names`` (a name ending in / is a directory)."""
    for name in names:
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    return root


# Issue 37: the app's venv where users keep it. (layout, venv's folder, app dir, working
# directory, where the note says it was found), all relative to one temporary folder.
LAYOUTS = [
    ("flat", ("proj/pyproject.toml",), "proj", "proj", "proj", "the app dir's .venv"),
    # Quart's blog example: `servelab study quick --app blog:app --app-dir src`
    ("src", ("proj/pyproject.toml",), "proj", "proj/src", "proj", "the project's .venv"),
    ("src, run elsewhere", ("proj/setup.cfg",), "proj", "proj/src", ".",
     "the project's .venv"),
    ("src, a git checkout", ("proj/.git/",), "proj", "proj/src", ".",
     "the repository's .venv"),
    ("a package in src", ("proj/pyproject.toml",), "proj", "proj/src/blog", "proj",
     "the project's .venv"),
    ("a venv above the app dir", ("proj/pyproject.toml",), "proj/src", "proj/src/blog", ".",
     ".venv above the app dir"),
    ("monorepo, the member's venv", (".git/", "packages/x/pyproject.toml"), "packages/x",
     "packages/x/src", "packages/x", "the project's .venv"),
    # a uv workspace: its members share the root's venv, found from the member's folder
    ("monorepo, the root's venv", (".git/", "pyproject.toml", "packages/x/pyproject.toml"),
     ".", "packages/x/src", "packages/x", "the project's .venv"),
    ("monorepo, run at its root", ("packages/x/pyproject.toml",), ".", "packages/x/src", ".",
     "the working directory's .venv"),
]


@pytest.mark.parametrize(
    ("markers", "venv_in", "app_dir", "cwd", "said"),
    [layout[1:] for layout in LAYOUTS], ids=[layout[0] for layout in LAYOUTS],
)
def test_the_nearest_venv_from_the_app_dir_up_to_the_project_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    markers: tuple[str, ...], venv_in: str, app_dir: str, cwd: str, said: str,
) -> None:
    python = _venv(_tree(tmp_path, *markers, f"{app_dir}/", f"{cwd}/") / venv_in)
    monkeypatch.chdir(tmp_path / cwd)
    relative = AppSpec(ref="m:app", app_dir=Path(os.path.relpath(tmp_path / app_dir)))
    assert find_app_python(relative, {}) == (python, said)
    assert find_app_python(AppSpec(ref="m:app", app_dir=tmp_path / app_dir), {}) == (
        python, said
    )
    settled, note = with_app_python(relative, {})
    assert settled.python == python and f"found in {said}; --python" in note


def test_the_nearest_venv_wins(tmp_path: Path) -> None:
    """A monorepo member's own venv before the checkout's, src's before the project's."""
    _tree(tmp_path, ".git/", "packages/x/pyproject.toml", "packages/x/src/")
    _venv(tmp_path)
    member = _venv(tmp_path / "packages/x")
    app = AppSpec(ref="m:app", app_dir=tmp_path / "packages/x/src")
    assert find_venv(tmp_path / "packages/x/src", tmp_path) == (member, "the project's .venv")
    assert find_app_python(app, {}) == (member, "the project's .venv")
    inner = _venv(tmp_path / "packages/x/src", "venv")
    assert find_venv(tmp_path / "packages/x/src", tmp_path) == (inner, "the app dir's venv")


def test_the_search_stops_at_the_project_root(tmp_path: Path) -> None:
    """Above the project (no git checkout), and above an app dir outside any project, a
    venv is not the app's: only the working directory's is looked at besides."""
    _venv(tmp_path)
    _tree(tmp_path, "proj/pyproject.toml", "proj/src/", "loose/app/")
    assert project_dirs(tmp_path / "proj/src") == [tmp_path / "proj/src", tmp_path / "proj"]
    assert find_venv(tmp_path / "proj/src", tmp_path / "proj") is None
    assert project_dirs(tmp_path / "loose/app") == [tmp_path / "loose/app"]
    assert find_venv(tmp_path / "loose/app", tmp_path / "loose") is None
    assert find_venv(tmp_path / "loose/app", tmp_path) == (
        tmp_path / ".venv/bin/python", "the working directory's .venv"
    )


def test_a_venv_found_beats_virtual_env_and_the_note_says_so(tmp_path: Path) -> None:
    """As in uv's project commands: a shell's activation outlives a cd to another
    project, so the project's venv wins and the note names the one passed over."""
    _tree(tmp_path, "proj/pyproject.toml", "proj/src/")
    project = _venv(tmp_path / "proj")
    active = _venv(tmp_path / "other")
    app = AppSpec(ref="m:app", app_dir=tmp_path / "proj/src")
    environ = {"VIRTUAL_ENV": str(active.parent.parent)}
    assert find_app_python(app, environ) == (project, "the project's .venv")
    settled, note = with_app_python(app, environ)
    assert settled.python == project
    assert (
        f"found in the project's .venv rather than $VIRTUAL_ENV's {active}; --python" in note
    )
    # `uv run` names the project's own venv: nothing passed over
    _, note = with_app_python(app, {"VIRTUAL_ENV": str(project.parent.parent)})
    assert "found in the project's .venv; --python" in note
    # servelab's own activated venv is not passed over either
    _, note = with_app_python(app, {"VIRTUAL_ENV": sys.prefix})
    assert "rather than" not in note


def test_virtual_env_names_the_apps_venv_when_the_project_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`poetry run` or an activated venv kept outside the project (poetry's cache)."""
    _tree(tmp_path, "proj/pyproject.toml", "proj/src/")
    active = _venv(tmp_path / "cache/proj-py3.12")
    monkeypatch.chdir(tmp_path / "proj")
    environ = {"VIRTUAL_ENV": str(active.parent.parent)}
    app = AppSpec(ref="m:app", app_dir=Path("src"))
    assert find_app_python(app, environ) == (active, "$VIRTUAL_ENV")
    settled, note = with_app_python(app, environ)
    assert settled.python == active and "found in $VIRTUAL_ENV; --python" in note
    given = tmp_path / "given" / "python"  # --python before everything
    assert find_app_python(app.model_copy(update={"python": given}), environ) == (given, "")


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


def test_servelabs_own_venv_in_the_working_directory_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run from servelab's checkout (its .venv in the working directory), the app's own
    # environment is still looked for, here the activated one.
    checkout = tmp_path / "servelab"
    own = _venv(checkout)
    monkeypatch.setattr("servelab.apps.interpreter.own_python", lambda: own)
    monkeypatch.chdir(checkout)
    python = _venv(tmp_path / "env")
    spec = AppSpec(ref="m:app", app_dir=tmp_path / "app")
    (tmp_path / "app").mkdir()
    assert find_app_python(spec, {"VIRTUAL_ENV": str(python.parent.parent)}) == (
        python, "$VIRTUAL_ENV"
    )
    assert find_app_python(spec, {}) == (None, "")
