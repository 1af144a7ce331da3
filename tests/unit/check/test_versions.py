"""The baseline from git: a detached worktree in a temporary directory, removed after the
check (also on Ctrl-C); the user's checkout never touched."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import git

from servelab.check.versions import baseline_version
from servelab.config.stack import AppSpec
from servelab.errors import SpecError


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose app dir ``web/`` says v1 at tag ``v1`` and v2 at HEAD."""
    root = tmp_path / "repo"
    (root / "web").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "web" / "app.py").write_text("VERSION = 1\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "v1")
    git(root, "tag", "v1")
    (root / "web" / "app.py").write_text("VERSION = 2\n")
    git(root, "commit", "-q", "-am", "v2")
    return root


def worktrees(repo: Path) -> list[str]:
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


def test_a_revision_is_checked_out_beside_and_removed_after(repo: Path) -> None:
    app = AppSpec(ref="app:app", app_dir=repo / "web")
    with baseline_version(app, None, "v1") as (where, label):
        assert where is not None and where.name == "web"
        assert (where / "app.py").read_text() == "VERSION = 1\n"
        assert label.startswith("v1 at ") and len(label) == len("v1 at ") + 10
        assert len(worktrees(repo)) == 2
        scratch = where.parents[1]
    assert not scratch.exists()
    assert len(worktrees(repo)) == 1
    assert (repo / "web" / "app.py").read_text() == "VERSION = 2\n"  # untouched
    assert git(repo, "status", "--porcelain") == ""


def test_ctrl_c_still_removes_the_worktree(repo: Path) -> None:
    app = AppSpec(ref="app:app", app_dir=repo / "web")
    with pytest.raises(KeyboardInterrupt), baseline_version(app, None, "HEAD~1") as (where, _):
        scratch = where.parents[1]
        raise KeyboardInterrupt
    assert not scratch.exists()
    assert len(worktrees(repo)) == 1


def test_a_revision_that_does_not_exist_is_one_line(repo: Path) -> None:
    app = AppSpec(ref="app:app", app_dir=repo / "web")
    with pytest.raises(SpecError, match=r"no git revision 'nope' in .*repo") as caught, \
            baseline_version(app, None, "nope"):
        pass
    assert "git log --oneline" in caught.value.fix


def test_a_dirty_work_tree_is_refused_not_stashed(repo: Path) -> None:
    (repo / "web" / "app.py").write_text("VERSION = 3\n")
    app = AppSpec(ref="app:app", app_dir=repo / "web")
    with pytest.raises(SpecError, match=r"has uncommitted changes \(web/app.py\)") as caught, \
            baseline_version(app, None, "v1"):
        pass
    assert "commit or stash" in caught.value.fix
    assert (repo / "web" / "app.py").read_text() == "VERSION = 3\n"
    assert len(worktrees(repo)) == 1


def test_not_a_repository_and_both_baselines_are_one_line(tmp_path: Path) -> None:
    app = AppSpec(ref="app:app", app_dir=tmp_path)
    with pytest.raises(SpecError, match="not in one"), baseline_version(app, None, "main"):
        pass
    with pytest.raises(SpecError, match="both name the baseline"), \
            baseline_version(app, tmp_path, "main"):
        pass
    with pytest.raises(SpecError, match="is not a directory"), \
            baseline_version(app, tmp_path / "missing", None):
        pass


def test_a_baseline_dir_is_used_as_it_is(tmp_path: Path) -> None:
    app = AppSpec(ref="app:app", app_dir=tmp_path / "new")
    with baseline_version(app, tmp_path, None) as (where, label):
        assert where == tmp_path.resolve() and label == str(tmp_path.resolve())
