"""The commits a bisection walks: from the good one to the bad one, first parents only,
oldest first; refused in one line when the bad one does not descend from the good one."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import git

from servelab.errors import SpecError
from servelab.history.run import commits_between


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


def test_a_retried_commit_is_measured_further_in_the_same_worktree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unknown step's retry extends its own check (same app dir, its experiment id),
    so the spec is the same one; every worktree is gone afterwards."""
    from types import SimpleNamespace

    from servelab.check import CheckSpec
    from servelab.config.run import RunOptions
    from servelab.config.stack import AppSpec
    from servelab.history.run import BisectSpec, run_bisect

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commits = [_commit(repo, str(number)) for number in range(5)]  # culprit: commit 3
    checks = []

    def run_check(check, options, **_):
        version = int((check.app.app_dir / "f.txt").read_text())
        checks.append((version, check.app.app_dir, options.extend_id, options.budget_s))
        unknown = version == 2 and options.extend_id is None
        state = "inconclusive" if unknown else "crossed" if version >= 3 else "held"
        return SimpleNamespace(state=state, starts=2 * len(checks), judgements=(),
                               experiment_id=len(checks), counts=None)

    monkeypatch.setattr("servelab.history.run.run_check", run_check)
    spec = BisectSpec(CheckSpec(app=AppSpec(ref="shop:app", app_dir=repo)), commits[0],
                      "main", retries=1)
    outcome = run_bisect(spec, RunOptions(budget_s=30), say=lambda _: None,
                         measure=lambda ready: tmp_path)
    assert outcome.ending == "found" and outcome.first_bad == commits[3]
    assert [(v, extend, budget) for v, _, extend, budget in checks] == [
        (4, None, 30), (2, None, 30), (2, 2, 60), (3, None, 30),
    ]
    assert checks[1][1] == checks[2][1]  # the retry measured the same worktree
    assert not any(app_dir.exists() for _, app_dir, _, _ in checks)
    assert git(repo, "status", "--porcelain") == "" and git(repo, "worktree", "list").count(
        "\n") == 0


def test_the_good_commit_is_counted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Instruction thresholds: the first step's count of the good commit is every later
    step's baseline (it does not move with the machine), so it is counted once."""
    from types import SimpleNamespace

    from servelab.check import CheckSpec
    from servelab.config.run import RunOptions
    from servelab.config.stack import AppSpec
    from servelab.history.run import BisectSpec, run_bisect

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commits = [_commit(repo, str(number)) for number in range(6)]  # culprit: commit 3
    given = []

    def run_check(check, options, **_):
        version = int((check.app.app_dir / "f.txt").read_text())
        given.append(check.baseline_counts)
        counted = check.baseline_counts or (1000.0, 1000.0)
        return SimpleNamespace(
            state="crossed" if version >= 3 else "held", starts=2, judgements=(),
            experiment_id=None, counts={"baseline": counted, "candidate": (1100.0, 1100.0)},
        )

    monkeypatch.setattr("servelab.history.run.run_check", run_check)
    spec = BisectSpec(CheckSpec(app=AppSpec(ref="shop:app", app_dir=repo),
                                thresholds=("instructions > +5%",)), commits[0], "main")
    outcome = run_bisect(spec, RunOptions(), say=lambda _: None, measure=lambda ready: tmp_path)
    assert outcome.first_bad == commits[3]
    assert given[0] == () and len(given) > 2
    assert all(counts == (1000.0, 1000.0) for counts in given[1:])
