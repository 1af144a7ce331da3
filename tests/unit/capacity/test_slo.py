"""Reading an SLO: latency bounds in any unit, an error ratio, one line for the rest."""

from __future__ import annotations

import math

import pytest

from servelab.capacity.slo import DEFAULT_MAX_ERROR_RATIO, LatencyBound, latency_stats, parse_slo
from servelab.errors import SpecError


def test_bounds_and_errors_are_read_in_their_units() -> None:
    slo = parse_slo("p99<100ms, p50 < 0.02s ,p999<250000us,errors<0.1%")
    assert slo.bounds == (
        LatencyBound("p99", 100.0), LatencyBound("p50", 20.0), LatencyBound("p999", 250.0),
    )
    assert slo.max_error_ratio == pytest.approx(0.001)
    assert parse_slo("mean<5ms").max_error_ratio == DEFAULT_MAX_ERROR_RATIO
    assert parse_slo("P99<1s,ERRORS<0.02").max_error_ratio == pytest.approx(0.02)
    assert str(parse_slo("p99<100ms,errors<1%")) == "p99 < 100 ms, errors < 1 %"


def test_the_margin_is_the_tightest_bound() -> None:
    slo = parse_slo("p99<100ms,p50<10ms")
    assert slo.margin({"p99": 50.0, "p50": 8.0}) == pytest.approx(10 / 8)
    assert slo.margin({"p99": 200.0, "p50": 1.0}) == pytest.approx(0.5)
    assert slo.margin({"p99": 0.0, "p50": 0.0}) == math.inf


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "the SLO is empty"),
        ("p99", "cannot read 'p99'"),
        ("p99>100ms", "cannot read 'p99>100ms'"),
        ("p97<100ms", "'p97', which is no latency statistic"),
        ("p99<100", "has no time unit"),
        ("p99<100min", "has no time unit"),
        ("p99<0ms", "must be positive"),
        ("errors<100%", "is not below 100 %"),
        ("errors<5ms", "is a ratio"),
        ("errors<1%", "bounds no latency"),
    ],
)
def test_a_bad_slo_is_one_line_with_the_fix(text: str, said: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_slo(text)
    assert said in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.fix


def test_latency_statistics_of_a_trial() -> None:
    stats = latency_stats([float(v) for v in range(1, 1001)], ["p50", "p99", "p999", "mean"])
    # Nearest rank, as every record's percentiles: the 500th, 990th and 999th of 1,000.
    assert (stats["p50"], stats["p99"], stats["p999"]) == (500.0, 990.0, 999.0)
    assert stats["mean"] == pytest.approx(500.5)
    assert latency_stats([], ["p99"]) == {"p99": 0.0}
