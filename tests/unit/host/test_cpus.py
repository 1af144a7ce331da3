"""CPU lists and the default plan that pins the stack and the driver apart."""

import os
import signal
import subprocess
import time

import psutil
import pytest

from servelab.errors import SpecError
from servelab.host.cpus import CpuPlan, count_cpus, default_cpu_plan, moved_to, parse_cpu_list


def test_parse_cpu_list():
    assert parse_cpu_list("0-2,5") == {0, 1, 2, 5}
    with pytest.raises(SpecError):
        parse_cpu_list("2-1")
    with pytest.raises(SpecError):
        parse_cpu_list("a")


def test_count_cpus_of_a_list_else_the_machines():
    assert count_cpus("0-2,5") == 4
    assert count_cpus("3") == 1
    assert count_cpus(None) == os.cpu_count()


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



@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to move between")
def test_moved_to_moves_a_tree_for_the_block_and_back() -> None:
    """A process and the one it forked run on the CPUs given inside the block, on their
    own CPUs again after it; one gone meanwhile is left out without an error."""
    own = os.sched_getaffinity(0)
    one = min(own)
    tree = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)
    gone = subprocess.Popen(["sleep", "30"])
    try:
        deadline = time.monotonic() + 5
        while not psutil.Process(tree.pid).children() and time.monotonic() < deadline:
            time.sleep(0.01)
        [child] = psutil.Process(tree.pid).children()
        with moved_to([tree.pid, gone.pid], str(one)) as moved:
            assert sorted(moved) == sorted([tree.pid, child.pid, gone.pid])
            assert os.sched_getaffinity(tree.pid) == os.sched_getaffinity(child.pid) == {one}
            gone.kill()
            gone.wait()
        assert os.sched_getaffinity(tree.pid) == os.sched_getaffinity(child.pid) == own
    finally:
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()
        gone.kill()
        gone.wait()
