"""Regression thresholds: parsing, and deciding one from a comparison's interval."""

from __future__ import annotations

import pytest

from servelab.analysis.stats import Comparison
from servelab.analysis.thresholds import (
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_PASS,
    exit_code,
    judge,
    overall,
    parse_threshold,
)


@pytest.mark.parametrize(
    ("text", "metric", "op", "limit", "normal"),
    [
        ("rps < -5%", "rps", "<", -5.0, "rps < -5%"),
        ("RPS<-5 %", "rps", "<", -5.0, "rps < -5%"),
        ("p99 > +10%", "latency_p99_ms", ">", 10.0, "p99 > +10%"),
        ("p99 > 2.5%", "latency_p99_ms", ">", 2.5, "p99 > +2.5%"),
        ("latency > +3%", "latency_mean_ms", ">", 3.0, "latency > +3%"),
        ("errors > 0", "errors", ">", 0.0, "errors > 0"),
        ("errors > 10", "errors", ">", 10.0, "errors > 10"),
        ("rps_per_cpu < -5%", "rps_per_cpu", "<", -5.0, "rps_per_cpu < -5%"),
    ],
)
def test_thresholds_in_the_ecosystems_words(text, metric, op, limit, normal) -> None:
    parsed = parse_threshold(text)
    assert (parsed.metric, parsed.op, parsed.limit, parsed.text) == (metric, op, limit, normal)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("rps", "write METRIC < or > VALUE"),
        ("rps <= -5%", "write METRIC < or > VALUE"),
        ("rps < five%", "write METRIC < or > VALUE"),
        ("throughput < -5%", "unknown metric 'throughput'"),
        ("rps < -5", "give a percentage (rps < -5%)"),
        ("errors > 1%", "errors is a count, give no %"),
        ("errors < 3", "a failing count is one above a limit"),
    ],
)
def test_what_is_not_a_threshold_says_why(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        parse_threshold(text)
    assert said in str(caught.value)


def comparison(low_pct: float, high_pct: float, change_pct: float | None = None) -> Comparison:
    change = (low_pct + high_pct) / 2 if change_pct is None else change_pct
    return Comparison(
        baseline_mean=100.0, variant_mean=100.0 + change, difference=change,
        difference_pct=change, interval=(low_pct, high_pct), p_value=0.01,
        verdict="worse", reason="",
    )


@pytest.mark.parametrize(
    ("threshold", "low", "high", "state"),
    [
        ("rps < -5%", -12.0, -8.0, "crossed"),  # entirely below -5 %
        ("rps < -5%", -7.0, -2.0, "inconclusive"),  # straddles -5 %
        ("rps < -5%", -4.0, 3.0, "held"),  # entirely above: no 5 % loss, with confidence
        ("rps < -5%", -5.0, 1.0, "held"),  # the limit itself is not beyond it
        ("p99 > +10%", 12.0, 30.0, "crossed"),
        ("p99 > +10%", 2.0, 14.0, "inconclusive"),
        ("p99 > +10%", -20.0, 9.0, "held"),
    ],
)
def test_crossed_held_or_inconclusive_by_where_the_interval_lies(threshold, low, high, state):
    judged = judge(parse_threshold(threshold), comparison(low, high), errors=0.0)
    assert judged.state == state
    assert judged.interval_pct == (low, high)


def test_errors_are_counted_not_estimated() -> None:
    assert judge(parse_threshold("errors > 0"), None, errors=3.0).state == "crossed"
    assert judge(parse_threshold("errors > 0"), None, errors=0.0).state == "held"
    assert judge(parse_threshold("errors > 5"), None, errors=5.0).state == "held"


def test_no_interval_is_inconclusive() -> None:
    judged = judge(parse_threshold("rps < -5%"), None, errors=0.0)
    assert judged.state == "inconclusive" and "no interval" in judged.reason


def test_the_check_exits_as_ci_expects() -> None:
    rps, errors = parse_threshold("rps < -5%"), parse_threshold("errors > 0")
    held = judge(rps, comparison(-1, 1), 0.0)
    crossed = judge(errors, None, 1.0)
    undecided = judge(rps, comparison(-7, -2), 0.0)
    assert overall([held, judge(errors, None, 0.0)]) == "held"
    assert overall([held, undecided]) == "inconclusive"
    assert overall([undecided, crossed]) == "crossed"
    assert exit_code("held") == EXIT_PASS == 0
    assert exit_code("crossed") == EXIT_FAIL == 1
    assert exit_code("inconclusive") == EXIT_INCONCLUSIVE == 10
    assert exit_code("inconclusive", "pass") == 0
    assert exit_code("crossed", "pass") == 1  # --inconclusive pass never hides a crossing
