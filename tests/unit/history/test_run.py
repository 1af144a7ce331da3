"""`servelab bisect --lock-good` driven without servers: each step's check (faked) gets
the step's budget, and a retry measures the same check further for twice the last; a
state that does not install or start is skipped; the answer names the change. (The real
thing: tests/integration/test_bisect_locks.py.)"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from servelab.check import CheckSpec
from servelab.config.run import RunOptions
from servelab.config.stack import AppSpec
from servelab.history.environments import LockInstallError
from servelab.history.run import LockBisectSpec, run_lock_bisect


class FakeEnvironments:
    def __init__(self, broken: set[int]) -> None:
        self.broken = broken

    def python(self, state: int, requirements) -> Path:
        if state in self.broken:
            raise LockInstallError("pip install failed: no matching distribution", "fix it")
        return Path(f"/envs/state-{state}/bin/python")


def _bisect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answers, broken=frozenset(),
            extends=None):
    extends = [] if extends is None else extends
    (tmp_path / "good.txt").write_text("a==1\nb==1\nc==1\nd==1\n")
    (tmp_path / "bad.txt").write_text("a==2\nb==2\nc==2\nd==2\n")
    checks = []
    starts: dict[int, int] = {}  # per experiment id: the starts measured so far

    def run_check(check, options, **_):
        state = int(check.app.python.parent.parent.name.split("-")[1])
        checks.append((state, options.budget_s, check.baseline_python))
        extends.append(options.extend_id)
        experiment = options.extend_id or len(checks)  # a new check gets a new id
        starts[experiment] = starts.get(experiment, 0) + 3
        return SimpleNamespace(state=answers(state, len(checks)), starts=starts[experiment],
                               judgements=(), experiment_id=experiment, counts=None)

    monkeypatch.setattr("servelab.history.run.run_check", run_check)
    monkeypatch.setattr(
        "servelab.history.environments.lock_environments",
        lambda wheelhouse, say: contextlib.nullcontext(FakeEnvironments(set(broken))),
    )
    spec = LockBisectSpec(CheckSpec(app=AppSpec(ref="shop:app")), tmp_path / "good.txt",
                          tmp_path / "bad.txt", retries=1)
    outcome = run_lock_bisect(spec, RunOptions(budget_s=40), say=lambda _: None,
                              measure=lambda ready: tmp_path)
    return outcome, checks


def test_each_step_gets_its_budget_and_an_unknown_one_twice_it_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The culprit is change 3 (c); state 2 is unknown the first time it is measured.
    def answers(state: int, number: int) -> str:
        if state == 2 and number == 2:
            return "inconclusive"
        return "crossed" if state >= 3 else "held"

    extends: list[int | None] = []
    outcome, checks = _bisect(tmp_path, monkeypatch, answers, extends=extends)
    assert [(state, budget) for state, budget, _ in checks] == [
        (4, 40), (2, 40), (2, 80), (3, 40),
    ]
    # The retry measures the unknown step's own check (#2) further; the others are new.
    assert extends == [None, None, 2, None]
    # Each step counts the starts it added: 3 each, not the retried check's 6.
    assert [(s.attempt, s.starts) for s in outcome.steps] == [(1, 3), (1, 3), (2, 3), (1, 3)]
    assert {python for _, _, python in checks} == {Path("/envs/state-0/bin/python")}
    assert outcome.ending == "found" and outcome.first_bad == "3: c 1 -> 2"
    assert outcome.last_good == "2: b 1 -> 2"


def test_a_state_that_does_not_install_is_skipped_and_the_answer_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # c 2 needs d 2 (they only install together): state 3 (a, b, c changed) does not
    # install; the culprit is d, so the first slower state is 4, with 3 before it.
    outcome, checks = _bisect(tmp_path, monkeypatch,
                              lambda state, number: "crossed" if state >= 4 else "held",
                              broken={3})
    assert [state for state, _, _ in checks] == [4, 2]  # state 3 never reached a check
    assert outcome.ending == "found" and outcome.first_bad == "4: d 1 -> 2"
    assert outcome.last_good == "2: b 1 -> 2" and outcome.untestable == ("3: c 1 -> 2",)
    skipped = [s for s in outcome.steps if s.decision == "skipped"]
    assert len(skipped) == 1 and "pip install failed" in skipped[0].detail
    assert "or one of the 1 before it that could not be measured (3: c 1 -> 2)" in (
        outcome.summary("lock state"))


def test_a_state_whose_app_does_not_start_is_skipped_but_a_good_one_that_does_not_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servelab.check import VersionDidNotStart
    from servelab.errors import StackStartError

    def answers(state: int, number: int) -> str:
        if state == 2:
            raise VersionDidNotStart("candidate", StackStartError("gunicorn exited", "see"))
        return "crossed" if state >= 3 else "held"

    outcome, checks = _bisect(tmp_path, monkeypatch, answers)
    assert [state for state, _, _ in checks] == [4, 2, 1, 3]  # 2 started, failed, skipped
    assert outcome.ending == "found" and outcome.first_bad == "3: c 1 -> 2"
    assert outcome.untestable == ("2: b 1 -> 2",) and outcome.last_good == "1: a 1 -> 2"
    [skipped] = [s for s in outcome.steps if s.decision == "skipped"]
    assert skipped.detail.startswith("the candidate version: gunicorn exited")

    def good_broken(state: int, number: int) -> str:
        raise VersionDidNotStart("baseline", StackStartError("gunicorn exited", "see"))

    with pytest.raises(VersionDidNotStart, match="the baseline version"):
        _bisect(tmp_path, monkeypatch, good_broken)
