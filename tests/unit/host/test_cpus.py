"""CPU lists and the default plan that pins the stack and the driver apart."""

import pytest

from servelab.errors import SpecError
from servelab.host.cpus import CpuPlan, default_cpu_plan, parse_cpu_list


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
