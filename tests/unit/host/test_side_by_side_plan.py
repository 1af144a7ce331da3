"""The side-by-side CPU planner on machines of 2 to 64 CPUs (pure: no real CPUs needed)."""

from __future__ import annotations

import pytest

from servelab.host.cpus import (
    CpuPlan,
    default_cpu_plan,
    parse_cpu_list,
    plan_side_by_side,
)


def machine(n: int) -> CpuPlan:
    return default_cpu_plan(frozenset(range(n)))


def test_two_cpus_every_stack_shares_the_stack_cpu():
    plan = plan_side_by_side(machine(2), stacks=3, stack_size=2)
    assert plan.stacks == ("0", "0", "0") and plan.drivers == ("1", "1", "1")
    assert not plan.own_stack_cpus and not plan.own_driver_cpus
    assert "sharing CPU 0" in plan.describe() and "requests per CPU second" in plan.describe()


def test_four_cpus_fit_three_one_cpu_stacks_but_not_their_drivers():
    plan = plan_side_by_side(machine(4), stacks=3, stack_size=1)
    assert plan.stacks == ("0", "1", "2") and plan.own_stack_cpus
    assert plan.drivers == ("3", "3", "3") and not plan.own_driver_cpus
    # Two-CPU stacks do not fit: they share.
    assert not plan_side_by_side(machine(4), stacks=3, stack_size=2).own_stack_cpus


@pytest.mark.parametrize(("cpus", "size"), [(16, 2), (16, 4), (64, 8), (64, 16)])
def test_big_machines_give_each_stack_and_driver_cpus_of_their_own(cpus, size):
    plan = plan_side_by_side(machine(cpus), stacks=3, stack_size=size)
    sets = [parse_cpu_list(s) for s in plan.stacks]
    drivers = [parse_cpu_list(d) for d in plan.drivers]
    assert plan.own_stack_cpus and plan.own_driver_cpus
    assert all(len(s) == size for s in sets)
    everything = sets + drivers
    assert sum(map(len, everything)) == len(frozenset().union(*everything))  # disjoint
    assert frozenset().union(*everything) <= frozenset(range(cpus))
    # The driver CPUs scale with the machine: a quarter of it, split between the stacks.
    assert all(len(d) == (cpus // 4) // 3 for d in drivers)
    assert "CPUs of its own" in plan.describe()


def test_sixteen_cpus_cannot_give_three_stacks_eight_each():
    plan = plan_side_by_side(machine(16), stacks=3, stack_size=8)  # 24 > 12 stack CPUs
    assert (not plan.own_stack_cpus and plan.stacks == ("0-11",) * 3) or plan.stacks[0] == (
        "0,1,2,3,4,5,6,7,8,9,10,11"
    )


def test_an_unpinned_plan_and_bad_sizes():
    assert plan_side_by_side(CpuPlan(None, None), 2).stacks == ("all", "all")
    with pytest.raises(ValueError):
        plan_side_by_side(machine(4), stacks=0)
