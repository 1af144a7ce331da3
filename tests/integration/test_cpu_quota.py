"""The stack's CPU quota: every process of the stack is inside the capped cgroup,
the load driver is not, and the cgroup is gone afterwards."""

from pathlib import Path

import pytest

from servelab.cgroups import cpu_quota, quota_unavailable_reason
from servelab.errors import SpecError
from servelab.spec import RequestSpec, StackSpec
from servelab.stacks import launch_stack

pytestmark = pytest.mark.integration


def cgroup_lines(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text()


@pytest.mark.skipif(quota_unavailable_reason() is not None, reason=str(quota_unavailable_reason()))
def test_every_stack_process_is_in_the_quota_cgroup_and_it_is_removed():
    stack = StackSpec(name="q", proxy={"kind": "nginx", "transport": "unix"})
    probe = RequestSpec(method="GET", path="/health")
    with cpu_quota(0.5) as quota:
        assert quota is not None
        name = quota.path.name
        if quota.path.parent.name == "cpu":  # cgroup v1
            assert (quota.path / "cpu.cfs_quota_us").read_text().strip() == "50000"
        with launch_stack(stack, probe=probe, quota=quota) as running:
            pids = [p.pid for p in running.processes.values()]
            children = [int(c) for c in (quota.path / "cgroup.procs").read_text().split()]
            assert set(pids) <= set(children)
            assert len(children) > len(pids), "the workers joined too"
            for pid in pids:
                assert name in cgroup_lines(pid)
            assert running.placement.driver_prefix() == [], "the driver never joins the quota"
        assert (quota.path / "cgroup.procs").read_text().split() == []
    assert not quota.path.exists()


def test_a_non_positive_quota_is_refused():
    with pytest.raises(SpecError, match="must be positive"), cpu_quota(0):
        pass
