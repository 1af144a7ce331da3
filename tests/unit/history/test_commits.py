"""The commits a bisection walks: from the good one to the bad one, first parents only,
oldest first; refused in one line when the bad one does not descend from the good one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from servelab.errors import SpecError
from servelab.history.run import commits_between


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        check=True, capture_output=True, text=True,
    ).stdout.strip()


def _commit(repo: Path, text: str, file: str = "f.txt") -> str:
    (repo / file).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", text)
    return git(repo, "rev-parse", "HEAD")


def test_the_path_from_good_to_bad_first_parents_only(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    good = _commit(tmp_path, "0")
    one = _commit(tmp_path, "1")
    git(tmp_path, "checkout", "-q", "-b", "side")
    side = _commit(tmp_path, "side", "g.txt")
    git(tmp_path, "checkout", "-q", "main")
    two = _commit(tmp_path, "2")
    git(tmp_path, "merge", "-q", "--no-edit", "side")
    merge = git(tmp_path, "rev-parse", "HEAD")
    path = commits_between(tmp_path, good, merge)
    assert path == [good, one, two, merge] and side not in path
    with pytest.raises(SpecError, match="does not descend from the good one"):
        commits_between(tmp_path, two, side)
    with pytest.raises(SpecError, match="name the same commit"):
        commits_between(tmp_path, good, good)
