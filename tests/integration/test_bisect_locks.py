"""servelab bisect --lock-good / --lock-bad for real: a small WSGI app whose dependency
`codec` 2.0 makes every request ten times the work, and two lock files that also differ
in a package added that changes nothing; from a wheelhouse (offline), bisect names the
codec change, each step a check of one lock state's environment against the good lock's,
and leaves no environment behind. (The culprit is the first change in the order of
names, so that every step is a slower one, which a check decides soonest; the commit
bisect's test has a step that is the same.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import write_wheel

pytestmark = pytest.mark.integration

CODEC = """
import hashlib

ROUNDS = {rounds}


def encode(data):
    for _ in range(ROUNDS):
        data = hashlib.sha256(data).digest()
    return data.hex().encode()
"""
APP = """
import codec
import markup


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [codec.encode(markup.VERSION.encode())]
"""


def test_bisect_names_the_dependency_change_that_made_it_slower(
    tmp_path: Path, no_leftover_processes
) -> None:
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "codec", "1.0", CODEC.format(rounds=2000))
    write_wheel(wheels, "codec", "2.0", CODEC.format(rounds=20_000))
    for name, versions in {"markup": ("1.0",), "tinyjson": ("1.0",)}.items():
        for version in versions:
            write_wheel(wheels, name, version, f"VERSION = {version!r}\n")
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "shop.py").write_text(APP)
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "shop"]):  # one commit
        subprocess.run(["git", "-C", str(tmp_path / "web"), "-c", "user.name=t", "-c",
                        "user.email=t@example.org", *args], check=True, capture_output=True)
    (tmp_path / "good.txt").write_text("codec==1.0\nmarkup==1.0\n")
    (tmp_path / "bad.txt").write_text(
        "# uv pip compile\nCodec==2.0 \\\n    --hash=sha256:00\nmarkup==1.0\ntinyjson==1.0\n"
    )
    before = set(Path("/tmp").glob("servelab-lock-*"))
    done = subprocess.run(
        [sys.executable, "-m", "servelab", "bisect", "--app", "shop:app", "--app-dir", "web",
         "--lock-good", "good.txt", "--lock-bad", "bad.txt", "--wheelhouse", "wheels",
         "--fail-if", "rps < -40%", "--budget", "40", "-d", "2", "--json", "bisect.json",
         "--junit", "bisect.xml", "--results", "results"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path, check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    answer = json.loads((tmp_path / "bisect.json").read_text())
    assert answer["unit"] == "lock state" and answer["ending"] == "found"
    # codec, then tinyjson: the first change is the culprit; the bad lock (state 2) is
    # checked first, then state 1, each slower than the good lock.
    assert answer["first_bad"] == "1: codec 1.0 -> 2.0", answer
    assert answer["last_good"] == "0 (the good lock)"
    assert [(s["commit"], s["decision"]) for s in answer["steps"]] == [
        ("2: tinyjson added (1.0)", "slower"), ("1: codec 1.0 -> 2.0", "slower"),
    ]
    assert "first slower lock state: 1: codec 1.0 -> 2.0" in done.stdout
    assert 'type="first slower lock state"' in (tmp_path / "bisect.xml").read_text()
    assert set(Path("/tmp").glob("servelab-lock-*")) == before  # every environment removed
    # Its checks ran one commit's code in two environments: no point of the history.
    history = subprocess.run(
        [sys.executable, "-m", "servelab", "history", "--results", "results"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
    )
    assert history.returncode == 2 and "names a committed version" in history.stderr
