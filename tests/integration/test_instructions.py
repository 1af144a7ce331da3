"""Checks and bisects on the app's instructions per request, counted under valgrind for
real: a generated repository of 12 commits, one of which adds 10 % of the request's
work, found on the first try whatever the machine's speed; and two identical versions of
an ASGI app held (the counts of the two differ by less than a percent)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import HASHING_APP, git

pytestmark = pytest.mark.integration

ASGI_APP = """
import hashlib


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    digest = b"servelab"
    for _ in range(300):
        digest = hashlib.sha256(digest).digest()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": digest})
"""
COMMITS = 12
CULPRIT = 8
# A commit whose app fails on the request (not at import): its count cannot be taken, so
# the step is skipped and its neighbour measured instead (12 commits: 11, 5, 8, 6, 7).
BROKEN = 6
BROKEN_APP = """
def app(environ, start_response):
    raise RuntimeError("half-done change")
"""
ROUNDS = 300


def servelab(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "servelab", *args], capture_output=True,
                          text=True, timeout=600, cwd=cwd, check=False)


def test_bisect_on_instructions_names_a_ten_percent_culprit(
    tmp_path: Path, no_leftover_processes, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / "web").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for number in range(COMMITS):
        rounds = round(ROUNDS * 1.1) if number >= CULPRIT else ROUNDS
        app = HASHING_APP.format(rounds=rounds, note=f"v{number}")
        (repo / "web" / "shop.py").write_text(BROKEN_APP if number == BROKEN else app)
        # An hour apart: the history orders commits by their time.
        monkeypatch.setenv("GIT_COMMITTER_DATE", f"@{1_790_000_000 + 3600 * number} +0000")
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", f"version {number}")
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    commits = git(repo, "rev-list", "--reverse", "HEAD").split()
    head_before = git(repo, "rev-parse", "HEAD")
    done = servelab("bisect", "--app", "shop:app", "--app-dir", str(repo / "web"),
                    "--good", commits[0], "--bad", "main", "--fail-if", "instructions > +5%",
                    "--json", str(tmp_path / "bisect.json"),
                    "--results", str(tmp_path / "results"), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    answer = json.loads((tmp_path / "bisect.json").read_text())
    assert answer["first_bad"] == commits[CULPRIT], answer
    assert answer["last_good"] == commits[CULPRIT - 1]
    # Every step decided at its first count, each commit on the side of the culprit it is;
    # the broken one skipped, saying why.
    assert all(s["attempt"] == 1 for s in answer["steps"]), answer["steps"]
    measured = [s for s in answer["steps"] if s["commit"] != commits[BROKEN]]
    [skipped] = [s for s in answer["steps"] if s["commit"] == commits[BROKEN]]
    assert skipped["decision"] == "skipped" and "half-done change" in skipped["detail"]
    for step in measured:
        slower = commits.index(step["commit"]) >= CULPRIT
        assert step["decision"] == ("slower" if slower else "same"), step
    assert "instructions > +5%: crossed" in done.stdout + done.stderr
    # Each measured check's counts kept, one directory per check; none for the skipped.
    kept = sorted((tmp_path / "results" / "instructions").iterdir())
    assert len(kept) == len(measured) and all((k / "counts.json").is_file() for k in kept)
    kept = [k / "counts.json" for k in kept]
    counts = json.loads(kept[0].read_text())["instructions_per_request"]
    assert len(counts["baseline"]) == len(counts["candidate"]) == 2
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "rev-parse", "HEAD") == head_before
    # The history page built from those checks (commits 0, 5, 7, 8, 11 counted) shows the
    # change point at the culprit, and nowhere else.
    done = servelab("history", "--results", str(tmp_path / "results"), "--out",
                    str(tmp_path / "history"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    markdown = (tmp_path / "history" / "history.md").read_text()
    assert "## Instructions per request, app, on" in markdown
    changes = [line for line in markdown.splitlines() if line.startswith("| `")]
    assert [commits[CULPRIT][:10] in line for line in changes] == [True], changes
    size = float(changes[0].split("|")[3].strip().removesuffix("%"))
    assert 9.5 < size < 10.5, changes  # the culprit's 10 % more hashing
    assert (tmp_path / "history" / "history.html").stat().st_size > 10_000


def test_identical_asgi_versions_hold(tmp_path: Path, no_leftover_processes) -> None:
    for name in ("old", "new"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "api.py").write_text(ASGI_APP)
    done = servelab("check", "--app", "api:app", "--app-dir", str(tmp_path / "new"),
                    "--baseline-dir", str(tmp_path / "old"), "--fail-if", "instructions > +1%",
                    "--results", str(tmp_path / "results"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "| `instructions > +1%` | ✅ held |" in done.stdout
    assert "instructions per request" in done.stderr


def test_mixed_thresholds_are_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "api.py").write_text(ASGI_APP)
    done = servelab("check", "--app", "api:app", "--app-dir", str(tmp_path),
                    "--baseline-dir", str(tmp_path), "--fail-if", "instructions > +1%",
                    "--fail-if", "rps < -5%", "--results", str(tmp_path / "results"),
                    cwd=tmp_path)
    assert done.returncode == 2
    assert "cannot be mixed" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "results").exists()
