"""docs/ci.md's history jobs, as far as a machine without a CI service can run them: the
cache carries the directory the check stores into and the history reads, and a store
carried from one CI run to the next (copied, as a cache restore puts it back) gives,
through the documented history line, a history of both runs' commits."""

from __future__ import annotations

import shutil
from pathlib import Path

from support import fake_load, fake_run, run_cli, servelab_lines, yaml_blocks

from servelab.check import CheckSpec, check_experiment
from servelab.config.stack import AppSpec
from servelab.results.records import ProcessUsage
from servelab.results.store import ResultStore

ROOT = Path(__file__).resolve().parents[3]
MACHINE = {"hostname": "runner", "cpu_model": "x", "cpu_count": 2, "kernel": "6.1"}


def _jobs() -> tuple[dict, dict]:
    blocks = [b for b in yaml_blocks((ROOT / "docs" / "ci.md").read_text()) if isinstance(b, dict)]
    github = next(b for b in blocks if "servelab-history" in b.get("jobs", {}))
    gitlab = next(b for b in blocks if "cache" in b.get("servelab-history", {}))
    return github["jobs"]["servelab-history"], gitlab["servelab-history"]


def _option(line: list[str], name: str) -> str:
    return line[line.index(name) + 1]


def test_the_cache_holds_what_the_check_stores_and_the_history_reads() -> None:
    github, gitlab = _jobs()
    steps = github["steps"]
    check, history = servelab_lines([s.get("run", "") for s in steps], {})
    restore = next(s for s in steps if s.get("uses", "").startswith("actions/cache/restore"))
    save = next(s for s in steps if s.get("uses", "").startswith("actions/cache/save"))
    assert check[:2] == ["servelab", "check"] and history[:2] == ["servelab", "history"]
    assert restore["with"]["path"] == save["with"]["path"] == _option(check, "--results")
    assert _option(history, "--results") == _option(check, "--results")
    # Each run saves under its own key; the next one restores the newest by the prefix.
    assert save["with"]["key"] == restore["with"]["key"]
    assert save["with"]["key"].startswith(restore["with"]["restore-keys"])
    assert save.get("if") == "always()"  # a failed check's result is kept too
    [on_gitlab] = servelab_lines(gitlab["script"], {})
    [gitlab_history] = servelab_lines(gitlab["after_script"], {})
    assert on_gitlab == check and gitlab_history == history  # one command, two CI systems
    assert gitlab["cache"]["paths"] == [_option(check, "--results") + "/"]
    assert gitlab["cache"]["when"] == "always"


def _store_check(results: Path, candidate: int, rps: float) -> None:
    experiment = check_experiment(CheckSpec(app=AppSpec(ref="shop.wsgi:app")), None)
    versions = {
        role: {"commit": f"{i:02d}" * 20, "time": f"2026-11-{1 + i:02d}T00:00:00+00:00",
               "dirty": False, "dir": "/w"}
        for role, i in (("candidate", candidate), ("baseline", candidate - 1))
    }
    store = ResultStore.create(results, experiment, {**MACHINE, "app_versions": versions})
    for role in ("candidate", "baseline"):
        for repetition in (1, 2):
            busy = ProcessUsage(role="app", pid=1, name="gunicorn", cpu_s=4.0,
                                peak_rss_bytes=1)
            store.add(fake_run(role, "app", repetition, experiment="check",
                               load=fake_load(rps=rps + repetition), processes=(busy,)))
    store.mark_finished()


def test_a_store_carried_from_run_to_run_gives_both_runs_commits(tmp_path: Path) -> None:
    github, _ = _jobs()
    check, history = servelab_lines([s.get("run", "") for s in github["steps"]], {})
    results = _option(check, "--results")
    first, second = tmp_path / "run-1", tmp_path / "run-2"
    _store_check(first / results, 1, 1000.0)  # CI run 1: commit 1 against 0
    shutil.copytree(first / results, second / results)  # the cache, restored in run 2
    _store_check(second / results, 2, 1000.0)  # CI run 2: commit 2 against 1
    done = run_cli(*history[1:], cwd=second)
    assert done.returncode == 0, done.stderr
    out = second / _option(history, "--out")
    markdown = (out / "history.md").read_text()
    assert "3 commits, 4 figures" in markdown  # commits 0, 1 (in both runs) and 2
    assert (out / "history.html").read_text().count("<figure>") == 2  # rps and per CPU
