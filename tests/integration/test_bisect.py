"""servelab bisect for real: a generated git repository of a small WSGI app, 8 commits,
one of which makes every request ten times the work and one (after it) whose app does not
start; bisect skips the one, names the other, every step a check in temporary worktrees,
and leaves the user's checkout as it was.

Ten times, and a threshold of -40 %: a check of two identical versions in turns, in its
first 30 s on this VM, read intervals as wide as -32 % ... +28 % (a fresh-clone run, with a
three-fold culprit and -20 %, stayed unknown on one commit twice: honestly unresolved, but
not what this test is about)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import HASHING_APP, git

pytestmark = pytest.mark.integration

# The commit (0-based) that makes the work ten times. Eight commits rather than the 12 of
# the benchmark (benchmarks/bisect_culprit.py): every step is a check of ~40 s
# here, and the steps (the bad end 7, then 2, then 1) are what matters: two slower ones
# and one the same, which takes longest.
COMMITS = 8
CULPRIT = 2
# The middle of the first halving: its app fails at import (a half-done change), so the
# step is skipped, as `git bisect skip` does, and the nearest measurable commit to the
# middle (2, the culprit) is measured instead.
BROKEN = 3
BROKEN_APP = "raise RuntimeError('half-done change')\n"


def test_bisect_names_the_commit_that_made_it_slower(tmp_path: Path, no_leftover_processes) -> None:
    repo = tmp_path / "repo"
    (repo / "web").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for number in range(COMMITS):
        rounds = 20_000 if number >= CULPRIT else 2000
        app = HASHING_APP.format(rounds=rounds, note=f"v{number}")
        (repo / "web" / "shop.py").write_text(BROKEN_APP + app if number == BROKEN else app)
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", f"version {number}")
    commits = git(repo, "rev-list", "--reverse", "HEAD").split()
    head_before = git(repo, "rev-parse", "HEAD")
    done = subprocess.run(
        [sys.executable, "-m", "servelab", "bisect", "--app", "shop:app",
         "--app-dir", str(repo / "web"), "--good", commits[0], "--bad", "main",
         "--fail-if", "rps < -40%", "--budget", "40", "-d", "2", "--retries", "2",
         "--json", str(tmp_path / "bisect.json"), "--junit", str(tmp_path / "bisect.xml"),
         "--results", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=900, cwd=tmp_path, check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    answer = json.loads((tmp_path / "bisect.json").read_text())
    assert answer["ending"] == "found"
    assert answer["first_bad"] == commits[CULPRIT], answer
    assert answer["last_good"] == commits[CULPRIT - 1]
    decisions = {s["commit"]: s["decision"] for s in answer["steps"]}
    assert decisions.pop(commits[BROKEN]) == "skipped", answer["steps"]
    assert all(
        decision == ("slower" if commits.index(commit) >= CULPRIT else "same")
        for commit, decision in decisions.items() if decision != "unknown"
    ), decisions
    assert [s["commit"] for s in answer["steps"] if s["attempt"] == 1] == [
        commits[7], commits[BROKEN], commits[2], commits[1]
    ]  # the bad end first, then halves; the broken middle skipped for its neighbour
    assert answer["untestable"] == []  # it is not between the last same and first slower
    assert "### servelab bisect: ❌ found" in done.stdout
    junit = (tmp_path / "bisect.xml").read_text()  # the CI's test view names the culprit
    assert 'type="first slower commit"' in junit and commits[CULPRIT] in junit
    assert "<skipped" in junit and "half-done change" in junit  # the skipped step, and why
    # The checkout as it was: no worktree left, HEAD and the files unchanged.
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "rev-parse", "HEAD") == head_before
