"""Capacities compared with the baseline's: the ratio, its interval from the two
searches' intervals, a verdict Holm-adjusted over the variants."""

from __future__ import annotations

import math

import pytest

from servelab.capacity.compare import compare_capacities, log_se
from servelab.capacity.plan import VariantCapacity
from servelab.capacity.search import Estimate


def _answer(name: str, rate: float | None, half_pct: float | None) -> VariantCapacity:
    interval = None
    if rate is not None and half_pct is not None:
        interval = (rate * (1 - half_pct / 100), rate * (1 + half_pct / 100))
    return VariantCapacity(name, Estimate(rate, interval, None, None), (), None)


def test_a_clear_gain_is_more_with_its_interval() -> None:
    base, keepalive, same = (
        _answer("base", 1000, 3), _answer("keepalive", 1180, 3), _answer("same", 1010, 3),
    )
    faster, unchanged = compare_capacities([base, keepalive, same], 0.9)
    assert faster.ratio == pytest.approx(1.18)
    assert faster.interval is not None and faster.interval[0] > 1.1 and faster.interval[1] < 1.26
    assert faster.verdict == "more" and faster.adjusted_p is not None
    assert faster.adjusted_p < 0.05
    assert unchanged.verdict == "no difference shown"
    # Holm over the two: the smaller p doubled, the larger kept (step-down).
    assert faster.adjusted_p == pytest.approx(2 * (faster.p_value or 0))
    said = faster.describe("base")
    assert said.startswith("keepalive: +18 % [+") and "capacity vs base (more;" in said


def test_log_standard_error_from_the_interval() -> None:
    se = log_se(_answer("a", 100, 10), 0.9)
    assert se == pytest.approx((math.log(110) - math.log(90)) / (2 * 1.6448536), rel=1e-6)
    assert log_se(_answer("a", 100, None), 0.9) is None


def test_a_search_without_an_interval_gives_no_ratio() -> None:
    [row] = compare_capacities([_answer("base", 1000, 3), _answer("x", 900, None)], 0.9)
    assert row.verdict == "no answer" and row.ratio is None
    assert "no capacity ratio" in row.describe("base")
    [row] = compare_capacities([_answer("base", None, None), _answer("x", 900, 2)], 0.9)
    assert row.verdict == "no answer"


def test_less_when_the_variant_holds_less() -> None:
    [row] = compare_capacities([_answer("base", 1000, 2), _answer("slow", 800, 2)], 0.9)
    assert row.verdict == "less" and row.ratio == pytest.approx(0.8)
