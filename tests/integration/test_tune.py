"""servelab tune end to end on the sleepy app with a two-candidate space: real nginx,
gunicorn and oha; Ctrl-C keeps the ranking so far, --resume finishes the race, and
export deploys (and boots) what the tune recommends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support import owned_by, with_default_sigint

pytestmark = pytest.mark.integration


def test_tune_keeps_its_ranking_through_ctrl_c_resumes_and_exports_the_winner(tmp_path):
    # The sleepy app holds a sync worker 10 ms per request: with 8 clients, 2 workers
    # serve about twice what 1 does, a difference the race must find in two rounds.
    argv = [
        sys.executable, "-m", "servelab", "tune", "--app", "sleepy", "--servers", "gunicorn",
        "--worker-class", "sync", "--workers", "1,2", "--transport", "unix",
        "--upstream-keepalive", "0", "-c", "8",
        "-d", "2", "--max-rounds", "5", "--results", str(tmp_path),
    ]
    env = {**os.environ, "SERVELAB_SLEEP_S": "0.01"}  # the sleepy app's default is 2 s
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True, preexec_fn=with_default_sigint,
    )
    ranking = tmp_path / "1-tune" / "tune.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if ranking.exists() and json.loads(ranking.read_text())["rounds"] >= 1:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the first round did not finish in time")
    os.killpg(proc.pid, signal.SIGINT)  # in round 2: what a terminal's Ctrl-C does
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    so_far = json.loads(ranking.read_text())
    assert so_far["rounds"] == 1 and so_far["over"] is None
    assert len(so_far["contenders"]) == 2 and so_far["dropped"] == []
    time.sleep(0.5)
    assert owned_by(proc.pid) == []
    runs_file = tmp_path / "1-tune" / "runs.jsonl"
    first_round = [line for line in runs_file.read_text().splitlines()
                   if json.loads(line)["repetition"] == 1]
    assert len(first_round) == 2

    done = subprocess.run(
        [*argv, "--resume"], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr
    final = json.loads(ranking.read_text())
    assert final["recommended"] == final["winner"] == "gunicorn-sync w=2 unix"
    assert final["over"] == "one candidate left"
    assert [d["candidate"] for d in final["dropped"]] == ["gunicorn-sync w=1 unix"]
    assert "against gunicorn-sync w=2 unix" in final["dropped"][0]["reason"]
    assert "**Recommended: gunicorn-sync w=2 unix**" in done.stdout
    lines = runs_file.read_text().splitlines()
    keys = [(r["variant"], r["repetition"]) for r in map(json.loads, lines)]
    assert len(keys) == len(set(keys))  # nothing measured twice
    assert lines[:2] == first_round  # round 1 kept as it was, not measured again
    # Round 2 at the earliest (two starts before anything is dropped), each round whole.
    assert 2 <= final["rounds"] <= 5 and len(keys) == 2 * final["rounds"]
    assert (tmp_path / "1-tune" / "tune.png").read_bytes().startswith(b"\x89PNG")

    out = tmp_path / "deploy"
    exported = subprocess.run(
        [sys.executable, "-m", "servelab", "export", "1", "--results", str(tmp_path),
         "--out", str(out)], capture_output=True, text=True, timeout=300, env=env,
    )
    assert exported.returncode == 0, exported.stderr
    assert "gunicorn-sync w=2 unix" in exported.stdout
    assert "recommended by servelab tune" in exported.stdout
    assert "booted" in exported.stdout or "checked:" in exported.stdout
    assert "workers = 2" in (out / "gunicorn.conf.py").read_text()


def test_tune_profile_explains_the_recommended_against_the_runner_up(tmp_path):
    """--profile: the race as without it, then the finalists' profiled starts; tune.md
    ends with the Why part and tune-flame.svg is a differential flame graph."""
    from servelab.host.profiler import profiler_problem

    problem = profiler_problem()
    if problem is not None:
        pytest.skip(problem)
    argv = [
        sys.executable, "-m", "servelab", "tune", "--app", "sleepy", "--servers", "gunicorn",
        "--worker-class", "sync", "--workers", "1,2", "--transport", "unix",
        "--upstream-keepalive", "0", "-c", "8", "-d", "1", "--max-rounds", "2",
        "--profile", "--results", str(tmp_path),
    ]
    env = {**os.environ, "SERVELAB_SLEEP_S": "0.01"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    result = tmp_path / "1-tune"
    document = json.loads((result / "tune.json").read_text())
    why = document["why"]
    recommended = document["recommended"] or document["winner"]
    assert why["explained"] == recommended and len(why["finalists"]) == 2
    runner_up = why["finalists"][1]
    assert why["profiled_starts"] == {recommended: 3, runner_up: 3}
    assert why["against"][0]["candidate"] == runner_up
    # The race's figures: its own rounds only, the profiled starts after them.
    runs = [json.loads(line) for line in (result / "runs.jsonl").read_text().splitlines()]
    profiled = [r for r in runs if r.get("profile")]
    assert {r["repetition"] for r in profiled} == set(
        range(document["rounds"] + 1, document["rounds"] + 4)
    )
    assert all(r["repetition"] <= document["rounds"] for r in runs if not r.get("profile"))

    markdown = (result / "tune.md").read_text()
    assert "## Why" in markdown
    assert f"{recommended} vs {runner_up} (" in markdown
    assert "Differential flame graph: tune-flame.svg" in markdown
    assert "## Why" in done.stdout and "tune-flame.svg" in done.stdout
    import xml.etree.ElementTree as ET

    svg = ET.parse(result / "tune-flame.svg").getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert len(svg.findall(".//{http://www.w3.org/2000/svg}rect")) > 1
