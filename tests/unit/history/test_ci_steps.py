"""docs/ci.md's history jobs (docs/ci/history-*.yml, included into the page), as far
as a machine without a CI service can run them: the cache carries the directory the check
stores into and the history reads, and a store carried from one CI run to the next
(copied, as a cache restore puts it back) gives, through the documented history line, a
history of both runs' commits."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from support import fake_load, fake_run, run_cli, servelab_lines

from servelab.check import CheckSpec, check_experiment
from servelab.config.stack import AppSpec
from servelab.results.records import ProcessUsage
from servelab.results.store import ResultStore

ROOT = Path(__file__).resolve().parents[3]
MACHINE = {"hostname": "runner", "cpu_model": "x", "cpu_count": 2, "kernel": "6.1"}


def _jobs() -> tuple[dict, dict]:
    """The history jobs the docs show (docs/ci/, included into docs/ci.md)."""
    github = yaml.safe_load((ROOT / "docs" / "ci" / "history-github.yml").read_text())
    gitlab = yaml.safe_load((ROOT / "docs" / "ci" / "history-gitlab.yml").read_text())
    return github["jobs"]["servelab-history"], gitlab["servelab-history"]


def _check_step(github: dict) -> dict:
    """The job's servelab check: the action's step (its inputs)."""
    [step] = [s for s in github["steps"] if s.get("uses", "").startswith("servelab/servelab@")]
    return step["with"]


def _option(line: list[str], name: str) -> str:
    return line[line.index(name) + 1]


def test_the_cache_holds_what_the_check_stores_and_the_history_reads() -> None:
    github, gitlab = _jobs()
    steps = github["steps"]
    check = _check_step(github)
    [history] = servelab_lines([s.get("run", "") for s in steps], {})
    restore = next(s for s in steps if s.get("uses", "").startswith("actions/cache/restore"))
    save = next(s for s in steps if s.get("uses", "").startswith("actions/cache/save"))
    assert history[:2] == ["servelab", "history"]
    assert restore["with"]["path"] == save["with"]["path"] == check["results"]
    assert _option(history, "--results") == check["results"]
    # Each run saves under its own key; the next one restores the newest by the prefix.
    assert save["with"]["key"] == restore["with"]["key"]
    assert save["with"]["key"].startswith(restore["with"]["restore-keys"])
    assert save.get("if") == "always()"  # a failed check's result is kept too
    # GitLab: the template's check job, with the same baseline and threshold; the
    # template stores into SERVELAB_RESULTS, which the second cache carries.
    template = yaml.safe_load((ROOT / "ci" / "servelab.gitlab-ci.yml").read_text())
    assert gitlab["extends"] == "servelab-check"
    assert gitlab["variables"]["SERVELAB_BASELINE_REF"] == check["baseline-ref"] == "HEAD~1"
    assert gitlab["variables"]["SERVELAB_THRESHOLDS"] == check["thresholds"]
    [gitlab_history] = servelab_lines(gitlab["after_script"], {})
    assert gitlab_history == history  # one command, two CI systems
    results = template["servelab-check"]["variables"]["SERVELAB_RESULTS"]
    assert results == check["results"]
    [carried] = [c for c in gitlab["cache"] if c["paths"] == [results + "/"]]
    assert carried["when"] == "always"
    # The template's own cache (servelab's tools) is kept beside it.
    assert template["servelab-check"]["cache"] in [
        {k: v for k, v in c.items() if k != "when"} for c in gitlab["cache"]
    ]


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
    [history] = servelab_lines([s.get("run", "") for s in github["steps"]], {})
    results = _check_step(github)["results"]
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
