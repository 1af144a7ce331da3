"""A CPU quota for the stack, like a container's ``--cpus``: a cgroup whose CPU
bandwidth is capped, which every process of the stack joins at birth.

Processes join through a one-line shell wrapper (``echo $$ > cgroup.procs;
exec server``), so the server and everything it forks are inside before they
run a single instruction of their own. Works with cgroup v2 (``cpu.max``) and
v1 (``cpu.cfs_quota_us``); needs write access to the cgroup tree (root).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from servelab.errors import SpecError
from servelab.procs import JANITOR

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000
_counter = itertools.count(1)


@dataclass(frozen=True)
class CpuQuota:
    cpus: float  # e.g. 1.5 = one and a half CPUs of time per wall-clock second
    path: Path  # the cgroup directory

    def wrap(self, argv: Sequence[str]) -> list[str]:
        procs = str(self.path / "cgroup.procs")
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *argv]


def _controller_dir() -> tuple[Path, str] | None:
    """(parent dir, 'v2' or 'v1') where a cpu-capped cgroup can be made, or None."""
    v2_controllers = CGROUP_ROOT / "cgroup.controllers"
    if v2_controllers.exists() and "cpu" in v2_controllers.read_text().split():
        return CGROUP_ROOT, "v2"
    v1 = CGROUP_ROOT / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists():
        return v1, "v1"
    return None


def quota_unavailable_reason() -> str | None:
    found = _controller_dir()
    if found is None:
        return "no cgroup cpu controller is mounted (cgroup v2 cpu.max or v1 cpu)"
    if not os.access(found[0], os.W_OK):
        return f"{found[0]} is not writable (a CPU quota needs root)"
    return None


@contextlib.contextmanager
def cpu_quota(cpus: float | None) -> Iterator[CpuQuota | None]:
    """A cgroup capped at ``cpus`` CPUs for the duration; None when no quota is asked."""
    if cpus is None:
        yield None
        return
    if cpus <= 0:
        raise SpecError(
            f"CPU quota must be positive, got {cpus}", "pass e.g. --stack-cpu-quota 1.5"
        )
    reason = quota_unavailable_reason()
    found = _controller_dir()
    if reason is not None or found is None:
        raise SpecError(f"cannot set a CPU quota: {reason}", "run without --stack-cpu-quota")
    parent, version = found
    path = parent / f"servelab-{os.getpid()}-{next(_counter)}"
    path.mkdir()
    JANITOR.watch("cgroup", path)
    try:
        quota_us = max(1000, round(cpus * PERIOD_US))
        if version == "v2":
            (path / "cpu.max").write_text(f"{quota_us} {PERIOD_US}")
        else:
            (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(quota_us))
        yield CpuQuota(cpus, path)
    finally:
        remove_cgroup(path)
        JANITOR.forget("cgroup", path)


def remove_cgroup(path: Path, timeout_s: float = 5.0) -> None:
    """rmdir a cgroup once its processes are gone (they were stopped by their owners)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
