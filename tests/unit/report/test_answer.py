"""The Answer's words agree with its own figures: an interval clear of zero next to "no
significant difference" says the verdict was judged over the study, and "both beat the
baseline" is said only when both did."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from servelab.analysis.metrics import METRIC_BY_KEY
from servelab.analysis.stats import Comparison
from servelab.report import answer
from servelab.report.answer import AnswerLine, _held_back, _winner


def comparison(low: float, high: float, verdict: str, family: int | None) -> Comparison:
    return Comparison(
        baseline_mean=100.0, variant_mean=100.0 + (low + high) / 2,
        difference=(low + high) / 2, difference_pct=(low + high) / 2,
        interval=(low, high), p_value=0.03, verdict=verdict, reason="",
        p_adjusted=0.09 if family else None, family=family,
    )


@pytest.mark.parametrize(
    ("low", "high", "verdict", "family", "held"),
    [
        (1.5, 27.5, "no significant difference", 8, True),  # alone p < 0.05, not over 8
        (-27.5, -1.5, "no significant difference", 8, True),
        (-2.0, 20.0, "no significant difference", 8, False),  # the interval says so too
        (1.5, 27.5, "better", 8, False),
        (1.5, 27.5, "no significant difference", 1, False),  # no family: cannot happen
        (1.5, 27.5, "no significant difference", None, False),
    ],
)
def test_a_verdict_held_back_by_the_family_says_so(low, high, verdict, family, held) -> None:
    judged_over, p_alone = _held_back(comparison(low, high, verdict, family))
    assert (judged_over is not None) is held
    line = AnswerLine("unix", (low + high) / 2, low, high, verdict, False, "t", None,
                      judged_over, p_alone)
    text = line.text()
    assert (f"{verdict} over the study's 8 comparisons (p = 0.03 alone)" in text) is held
    assert verdict in text


def line(variant: str, change: float, verdict: str) -> AnswerLine:
    return AnswerLine(variant, change, change - 5, change + 5, verdict, True, "t", None)


@pytest.mark.parametrize(
    ("runner_up_verdict", "said"),
    [
        ("better", "both beat the baseline"),
        ("no significant difference", "which does not significantly beat the baseline"),
    ],
)
def test_no_single_winner_says_only_what_was_found(monkeypatch, runner_up_verdict, said) -> None:
    versus = comparison(-6.1, 17.9, "no significant difference", None)
    monkeypatch.setattr(answer, "compare_variants", lambda *args, **kwargs: versus)
    analysis = SimpleNamespace(
        experiment=SimpleNamespace(baseline=SimpleNamespace(name="tcp")),
        for_workload=lambda workload: [],
    )
    lines = [line("unix", 13.8, runner_up_verdict), line("keepalive", 19.7, "better")]
    winner, note = _winner(analysis, "w", lines, METRIC_BY_KEY["rps"])  # type: ignore[arg-type]
    assert winner is None
    assert said in note
    assert ("both beat" in note) is (runner_up_verdict == "better")


def test_on_latency_the_variant_whose_p99_fell_most_wins(monkeypatch) -> None:
    """A replay's Answer is about p99, lower is better: the verdicts say "better" for a
    fall, and the winner is the variant that fell most (not "no variant is better")."""
    versus = comparison(-35.0, -15.0, "better", None)  # keepalive against unix, directly
    monkeypatch.setattr(answer, "compare_variants", lambda *args, **kwargs: versus)
    analysis = SimpleNamespace(
        experiment=SimpleNamespace(baseline=SimpleNamespace(name="tcp")),
        for_workload=lambda workload: [],
    )
    lines = [line("unix", -19.6, "better"), line("keepalive", -41.8, "better")]
    metric = METRIC_BY_KEY["latency_p99_ms"]
    assert not metric.higher_is_better
    winner, note = _winner(analysis, "w", lines, metric)  # type: ignore[arg-type]
    assert winner == "keepalive", note
    assert note.startswith("-41.8 % vs baseline")
    worse = [line("unix", 12.0, "worse"), line("keepalive", 20.0, "worse")]
    assert _winner(analysis, "w", worse, metric)[0] == "tcp"  # type: ignore[arg-type]
