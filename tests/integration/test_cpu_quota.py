"""The stack's cgroups: every server of the stack in a child group of the capped (and
favoured) stack group, the load driver not, and every group gone afterwards."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from servelab.config.load import RequestSpec
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.host.cgroups import cpu_group, quota_unavailable_reason
from servelab.launch import launch_stack

pytestmark = pytest.mark.integration
needs_cgroups = pytest.mark.skipif(
    quota_unavailable_reason() is not None, reason=str(quota_unavailable_reason())
)


def cgroup_lines(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text()


def members(group: Path) -> set[int]:
    return {int(pid) for pid in (group / "cgroup.procs").read_text().split()}


@needs_cgroups
def test_every_stack_process_is_in_the_quota_cgroup_and_it_is_removed():
    stack = StackSpec(name="q", proxy={"kind": "nginx", "transport": "unix"})
    probe = RequestSpec(method="GET", path="/health")
    with cpu_group(quota=0.5, per_process=True) as quota:
        assert quota is not None
        name = quota.path.name
        if quota.version == "v1":
            assert (quota.path / "cpu.cfs_quota_us").read_text().strip() == "50000"
        with launch_stack(stack, probe=probe, quota=quota) as running:
            children = sorted(c for c in quota.path.iterdir() if c.is_dir())
            assert len(children) == 2, "one child group per server (app, nginx)"
            app, nginx = running.processes["app"].pid, running.processes["nginx"].pid
            assert app in members(children[0]) and nginx in members(children[1])
            assert len(members(children[0])) > 1, "the app server's workers joined too"
            for pid in (app, nginx):
                assert name in cgroup_lines(pid)
            assert running.placement.driver_prefix() == [], "the driver never joins the quota"
        assert all(members(c) == set() for c in children)
    assert not quota.path.exists()


@needs_cgroups
def test_a_favoured_group_has_raised_weight_and_its_processes_leave_with_it():
    with cpu_group(favoured=True) as group:
        assert group is not None and group.favoured and group.cpus is None
        knob = "cpu.shares" if group.version == "v1" else "cpu.weight"
        assert (group.path / knob).read_text().strip() in ("102400", "10000")
        out = subprocess.run(
            [*group.wrap(["cat", "/proc/self/cgroup"])], capture_output=True, text=True, check=True
        ).stdout
        assert group.path.name in out
    assert not group.path.exists()


def test_a_non_positive_quota_is_refused():
    with pytest.raises(SpecError, match="must be positive"), cpu_group(quota=0):
        pass


@needs_cgroups
def test_servelab_joins_the_driver_group_for_the_block_and_goes_back():
    from servelab.host.cgroups import joined

    before = Path("/proc/self/cgroup").read_text()
    with cpu_group(favoured=True) as group, joined(group):
        assert str(os.getpid()) in (group.path / "cgroup.procs").read_text().split()
        assert group.path.name in Path("/proc/self/cgroup").read_text()
    assert Path("/proc/self/cgroup").read_text() == before
    assert not group.path.exists()


@needs_cgroups
def test_a_process_left_in_a_group_is_killed_and_the_group_removed():
    # Its owner gave up on it (a driver slow to exit after Ctrl-C on a busy machine, CI
    # stop 51): the group must not outlive servelab, nor the process.
    from servelab.host.cgroups import remove_cgroup

    with cpu_group(favoured=True) as group:
        assert group is not None
        left = subprocess.Popen(group.wrap(["sleep", "60"]))
        deadline = time.monotonic() + 5
        while left.pid not in members(group.path) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert left.pid in members(group.path)
        remove_cgroup(group.path, timeout_s=0.2)
        assert not group.path.exists()
        assert left.wait(timeout=5) == -9
