"""Pure statistics: summaries, intervals, Welch's and the paired test, hand-computed."""

import math

import pytest

from servelab.analysis.stats import (
    compare,
    compare_paired,
    confidence_interval,
    percent_change,
    runs_needed,
    summarize,
)


def test_summarize_hand_computed():
    s = summarize([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert s.mean == 5.0
    assert s.stdev == pytest.approx(2.138089935)  # sample stdev, n - 1
    assert (s.minimum, s.maximum, s.n, s.median) == (2.0, 9.0, 8, 4.5)
    assert s.cv == pytest.approx(2.138089935 / 5.0)


def test_summarize_single_value_and_zero_mean():
    one = summarize([3.0])
    assert one.stdev == 0.0 and one.mean == 3.0
    assert math.isnan(summarize([0.0, 0.0]).cv)
    with pytest.raises(ValueError):
        summarize([])


def test_percent_change():
    assert percent_change(1343.72, 1348.8) == pytest.approx(0.378, abs=1e-3)  # seed's 0.38 %
    assert percent_change(0, 5) is None


def test_confidence_interval_hand_computed():
    low, high = confidence_interval([1.0, 2.0, 3.0])
    # mean 2, s = 1, t(0.975, 2) = 4.302653 -> half width 4.302653 / sqrt(3) = 2.484138
    assert (low, high) == (pytest.approx(2 - 2.484138), pytest.approx(2 + 2.484138))
    assert confidence_interval([5.0]) is None


def test_runs_needed_for_one_percent():
    # mean 100, s = 10, t(0.975, 2) = 4.302653: (4.302653 * 10 / 1) ** 2 = 1851.3 -> 1852
    assert runs_needed([90.0, 100.0, 110.0], precision_pct=1.0) == 1852
    assert runs_needed([100.0], precision_pct=1.0) is None


def test_compare_clear_improvement_and_regression():
    faster = compare([1000, 1010, 990], [1100, 1090, 1110])
    assert faster.verdict == "better" and faster.difference == pytest.approx(100)
    assert faster.difference_pct == pytest.approx(10.0)
    # Welch: se = sqrt(100/3 + 100/3) = 8.165, dof = 4, t(0.975, 4) = 2.776445
    low, high = faster.interval
    assert low == pytest.approx(100 - 2.776445 * 8.164966, rel=1e-5)
    assert high == pytest.approx(100 + 2.776445 * 8.164966, rel=1e-5)
    slower_latency = compare([10, 11, 10.5], [20, 21, 20.5], higher_is_better=False)
    assert slower_latency.verdict == "worse"


def test_compare_says_inconclusive_when_no_test_is_possible():
    assert compare([1000], [1100, 1090]).verdict == "inconclusive"
    tie = compare([5.0, 5.0, 5.0], [6.0, 6.0, 6.0])
    assert tie.verdict == "inconclusive" and tie.p_value is None
    zeros = compare([0.0, 0.0, 0.0], [0.0, 0.0])  # e.g. no errors on either side
    assert zeros.verdict == "no difference" and zeros.reason == "identical in every run"


def test_compare_no_difference_and_minimum_effect():
    same = compare([1000, 1010, 990], [1000, 1010, 990])
    assert same.verdict == "no significant difference" and same.p_value == pytest.approx(1.0)
    small = compare([1000, 1001, 999], [1010, 1011, 1009], min_effect_pct=5.0)
    assert small.p_value < 0.05
    assert small.verdict == "no significant difference"
    assert "minimum effect" in small.reason


def test_paired_test_against_hand_computed_values():
    # Round-to-round drift of ±10 req/s hides a steady +2 from Welch's test; the
    # per-round differences (2, 3, 1: mean 2, sd 1, se 1/sqrt(3)) do not.
    baseline, variant = [100.0, 110.0, 120.0], [102.0, 113.0, 121.0]
    paired = compare_paired(baseline, variant)
    assert paired.difference == pytest.approx(2.0)
    # t = 2 / (1 / sqrt(3)) = 3.4641 with 2 degrees of freedom: two-sided p = 0.0742.
    assert paired.p_value == pytest.approx(0.07418, abs=1e-4)
    half = 4.302653 / math.sqrt(3)  # t(0.975, 2) x se
    assert paired.interval == pytest.approx((2 - half, 2 + half), abs=1e-4)
    assert paired.verdict == "no significant difference"
    assert compare(baseline, variant).p_value > 0.8  # Welch sees only the drift
    tighter = compare_paired(baseline, [102.0, 112.5, 122.5])  # differences 2, 2.5, 2.5
    assert tighter.verdict == "better" and tighter.p_value < 0.01


def test_paired_test_edge_cases():
    assert compare_paired([1.0], [2.0]).verdict == "inconclusive"
    same = compare_paired([5.0, 6.0, 7.0], [5.0, 6.0, 7.0])
    assert same.verdict == "no difference" and same.interval == (0.0, 0.0)
    shifted = compare_paired([5.0, 6.0, 7.0], [6.0, 7.0, 8.0])
    assert shifted.verdict == "inconclusive" and shifted.p_value is None
    with pytest.raises(ValueError):
        compare_paired([1.0, 2.0], [1.0])


def test_rounds_are_paired_from_three_matching_rounds_only():
    from support import seed_run as run

    from servelab.analysis.comparisons import compare_rounds
    from servelab.analysis.metrics import METRIC_BY_KEY

    rps = METRIC_BY_KEY["rps"]
    base = [run("tcp", n, r, 50.0) for n, r in ((1, 100.0), (2, 110.0), (3, 120.0))]
    var = [run("unix", n, r, 50.0) for n, r in ((1, 102.0), (2, 113.0), (3, 121.0))]
    paired = compare_rounds(base, var, rps)
    assert paired.reason.startswith("paired by round") and paired.p_value == pytest.approx(
        0.07418, abs=1e-4
    )
    welch = compare_rounds(base[:2], var[:2], rps)  # two rounds: Welch
    assert not welch.reason.startswith("paired")
    unmatched = compare_rounds(base, var[:2], rps)  # a round missing on one side: Welch
    assert not unmatched.reason.startswith("paired")


def test_a_tiny_p_value_is_printed_as_below_its_floor() -> None:
    from servelab.analysis.stats import p_text

    assert p_text(0.0557) == "= 0.056"
    assert p_text(0.0557, 3) == "= 0.0557"
    assert p_text(4.9e-108) == "< 0.0001"  # not "= 4.9e-108": the model is not that exact
    assert p_text(1e-4) == "= 0.0001"
