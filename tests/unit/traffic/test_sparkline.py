"""The rate over time as one line of bars."""

from __future__ import annotations

import pytest

from servelab.traffic.sparkline import BARS, resample, sparkline


def test_bars_from_zero_to_the_largest() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == BARS
    assert sparkline([0, 7]) == "▁█"
    assert sparkline([5, 5, 5]) == "███"


def test_nothing_and_zeros() -> None:
    assert sparkline([]) == ""
    assert sparkline([0, 0]) == "▁▁"


def test_resampled_to_the_width_by_means() -> None:
    values = [0.0] * 50 + [10.0] * 50
    line = sparkline(values, width=10)
    assert line == "▁" * 5 + "█" * 5
    assert resample(values, 4) == [0, 0, 10, 10]
    assert resample([1, 2, 3], 10) == [1, 2, 3]
    assert resample([1, 2, 3, 4, 5], 2) == [1.5, 4]  # 2 and 3 of 5 values


def test_a_burst_shows_but_does_not_flatten_the_rest() -> None:
    values = [1.0] * 99 + [8.0]
    line = sparkline(values, width=100)
    assert line[-1] == "█" and set(line[:-1]) == {"▂"}


def test_every_width() -> None:
    values = [float(i % 17) for i in range(1000)]
    for width in (1, 2, 7, 60, 999, 1000, 5000):
        assert len(sparkline(values, width)) == min(width, 1000)
    with pytest.raises(ValueError, match="width"):
        sparkline(values, 0)
