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
