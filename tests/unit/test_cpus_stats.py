import math

import pytest

from servelab.cpus import CpuPlan, default_cpu_plan, parse_cpu_list
from servelab.errors import SpecError
from servelab.stats import percent_change, summarize


def test_parse_cpu_list():
    assert parse_cpu_list("0-2,5") == {0, 1, 2, 5}
    with pytest.raises(SpecError):
        parse_cpu_list("2-1")
    with pytest.raises(SpecError):
        parse_cpu_list("a")


@pytest.mark.parametrize(
    ("cpus", "stack", "driver"),
    [({0, 1}, "0", "1"), ({0, 1, 2, 3}, "0,1,2", "3"), (set(range(8)), "0,1,2,3,4,5", "6,7")],
)
def test_default_plan_gives_the_driver_a_quarter(cpus, stack, driver):
    plan = default_cpu_plan(frozenset(cpus))
    assert (plan.stack, plan.driver) == (stack, driver)
    assert not plan.shared


def test_single_cpu_is_not_pinned_and_says_it_shares():
    plan = default_cpu_plan(frozenset({0}))
    assert not plan.pinned and plan.shared
    assert CpuPlan("0,1", "1").shared


def test_summarize_hand_computed():
    s = summarize([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert s.mean == 5.0
    assert s.stdev == pytest.approx(2.138089935)  # sample stdev, n - 1
    assert (s.minimum, s.maximum, s.n) == (2.0, 9.0, 8)
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
