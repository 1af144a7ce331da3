"""The stopping rule asks the session's analysis of the runs so far rather than analysing
them again, and only when it holds the very runs it decides on."""

from __future__ import annotations

import pytest
from support import FakeExecutor, ListSink, quick_shaped

from servelab.analysis.so_far import AnalysisSoFar
from servelab.measuring import Runner, stopping
from servelab.measuring.stopping import PrecisionRule, RoundsSoFar


def _runs() -> list:
    experiment = quick_shaped(side_by_side=False).model_copy(update={"stopping": None})
    def level(variant: str, start: int, tick: int, workload: str) -> float:
        return 1000.0 + (7 * start + 13 * tick) % 50  # noisy: not clear after 2 rounds

    return Runner(experiment, ListSink(), FakeExecutor(level)).run()


def test_the_rule_asks_the_sessions_analysis_of_the_same_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    experiment = quick_shaped(side_by_side=False)
    runs = _runs()
    so_far = AnalysisSoFar(experiment)
    for run in runs:
        so_far.add(run)
    alone = PrecisionRule(experiment).next_round(runs, 0.0, RoundsSoFar())

    def analyse_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("analysed every run again")

    monkeypatch.setattr(stopping, "analyze", analyse_again)
    shared = PrecisionRule(experiment, so_far).next_round(runs, 0.0, RoundsSoFar())
    assert alone is not None and shared == alone
    # Runs that are not the ones it holds (one fewer; equal copies) are analysed afresh.
    for other in (runs[:-1], [run.model_copy() for run in runs]):
        with pytest.raises(AssertionError, match="analysed every run again"):
            PrecisionRule(experiment, so_far).next_round(other, 0.0, RoundsSoFar())


def test_every_look_says_how_many_are_clear_and_how_long_the_rest_would_take() -> None:
    experiment = quick_shaped(side_by_side=False)
    runs = _runs()
    rounds = RoundsSoFar()
    rounds.add_launch(2, 10.0)
    for workload in ("w0", "w1", "w2", "w3"):
        rounds.add_workload(workload, 4, 20.0)
    rule = PrecisionRule(experiment)
    plan = rule.next_round(runs, 30.0, rounds)
    assert plan is not None  # measuring goes on, and the rule said where it stands
    outlook = rule.outlook
    assert outlook is not None and outlook.reason == ""
    assert outlook.total == 8 and outlook.clear == 8 - len(outlook.unclear)
    assert outlook.unclear  # noisy: not all clear after 2 rounds
    assert outlook.left_s == pytest.approx(experiment.stopping.budget_s - 30.0)
    assert outlook.expected_s == min(outlook.more_seconds, outlook.left_s)


def test_a_budget_that_cannot_make_them_clear_is_known_at_the_first_look() -> None:
    outlook = stopping.Outlook(
        unclear=(("w0", "unix"),), more_starts=40, more_seconds=1200.0, reason="",
        clear=7, total=8, left_s=100.0,
    )
    assert outlook.beyond_budget and outlook.expected_s == 100.0
    enough = stopping.Outlook(
        unclear=(("w0", "unix"),), more_starts=1, more_seconds=30.0, reason="",
        clear=7, total=8, left_s=100.0,
    )
    assert not enough.beyond_budget and enough.expected_s == 30.0
