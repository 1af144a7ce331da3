"""cgroups for the stack and the load driver: an optional CPU quota for the stack,
like a container's ``--cpus``, and a raised CPU weight for both, so that other
work on the machine (a browser, a compiler, a test suite) cannot take the
stack's or the driver's CPUs from them while they measure.

The weight does not stop other processes: they run whenever servelab's do not
want the CPU, but when both want it the kernel gives servelab's ~99 %. Inside
the stack's group each server gets a child group of equal weight, as systemd
gives each service its own, so nginx and the app server share the stack's CPU
as they would in production (not per process, which would hand the app server
one share per worker).

Processes join through a one-line shell wrapper (``echo $$ > cgroup.procs;
exec server``), so the server and everything it forks are inside before they
run a single instruction of their own. Works with cgroup v2 (``cpu.max``,
``cpu.weight``) and v1 (``cpu.cfs_quota_us``, ``cpu.shares``); needs write
access to the cgroup tree (root). Without it servelab measures unfavoured and
says so.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from servelab.errors import SpecError
from servelab.host.procs import JANITOR

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000
# 100 times the default weight (v2 cpu.weight 100, v1 cpu.shares 1024).
FAVOURED_WEIGHT = {"v2": ("cpu.weight", "10000"), "v1": ("cpu.shares", "102400")}
_counter = itertools.count(1)


@dataclass(frozen=True)
class CpuGroup:
    """A cgroup the stack's (or the driver's) processes start in.

    ``per_process``: every ``wrap`` makes a child group of default weight (one
    per server of the stack); otherwise processes join the group itself.
    """

    path: Path
    version: str  # "v1" or "v2"
    cpus: float | None = None  # CPU-time cap: 1.5 = one and a half CPUs per second
    favoured: bool = False  # weight raised 100-fold over other processes
    per_process: bool = False
    _children: Iterator[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` made to start inside this group (a new child group if per_process)."""
        target = self.path
        if self.per_process:
            target = self.path / f"p{next(self._children)}"
            target.mkdir()
            JANITOR.watch("cgroup", target)
        procs = str(target / "cgroup.procs")
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *argv]

    def prune(self) -> None:
        """Remove the child groups (their processes were stopped by their owners)."""
        if not self.path.is_dir():
            return
        for child in sorted((c for c in self.path.iterdir() if c.is_dir()), reverse=True):
            remove_cgroup(child)
            JANITOR.forget("cgroup", child)


def _controller_dir() -> tuple[Path, str] | None:
    """(parent dir, 'v2' or 'v1') where a cpu cgroup can be made, or None."""
    v2_controllers = CGROUP_ROOT / "cgroup.controllers"
    if v2_controllers.exists() and "cpu" in v2_controllers.read_text().split():
        return CGROUP_ROOT, "v2"
    v1 = CGROUP_ROOT / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists():
        return v1, "v1"
    return None


def quota_unavailable_reason() -> str | None:
    """Why no cpu cgroup can be made here (quota or weight), or None when one can."""
    found = _controller_dir()
    if found is None:
        return "no cgroup cpu controller is mounted (cgroup v2 cpu.max or v1 cpu)"
    if not os.access(found[0], os.W_OK):
        return f"{found[0]} is not writable (a CPU quota needs root)"
    return None


@contextlib.contextmanager
def cpu_group(
    *, quota: float | None = None, favoured: bool = False, per_process: bool = False
) -> Iterator[CpuGroup | None]:
    """A cgroup with the quota and/or raised weight for the ``with`` block, removed after.

    None when neither is asked for, or when only favour is asked and cgroups are
    not writable here (measuring unfavoured is still measuring); a quota that
    cannot be set is an error.
    """
    if quota is not None and quota <= 0:
        raise SpecError(
            f"CPU quota must be positive, got {quota}", "pass e.g. --stack-cpu-quota 1.5"
        )
    if quota is None and not favoured:
        yield None
        return
    reason = quota_unavailable_reason()
    found = _controller_dir()
    if reason is not None or found is None:
        if quota is None:
            yield None
            return
        raise SpecError(f"cannot set a CPU quota: {reason}", "run without --stack-cpu-quota")
    parent, version = found
    path = parent / f"servelab-{os.getpid()}-{next(_counter)}"
    path.mkdir()
    JANITOR.watch("cgroup", path)
    try:
        if quota is not None:
            quota_us = max(1000, round(quota * PERIOD_US))
            if version == "v2":
                (path / "cpu.max").write_text(f"{quota_us} {PERIOD_US}")
            else:
                (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (path / "cpu.cfs_quota_us").write_text(str(quota_us))
        if favoured:
            knob, value = FAVOURED_WEIGHT[version]
            (path / knob).write_text(value)
        if per_process and version == "v2":
            (path / "cgroup.subtree_control").write_text("+cpu")
        yield CpuGroup(path, version, quota, favoured, per_process)
    finally:
        CpuGroup(path, version).prune()
        remove_cgroup(path)
        JANITOR.forget("cgroup", path)


@contextlib.contextmanager
def joined(group: CpuGroup | None) -> Iterator[None]:
    """This process (all its threads) inside ``group`` for the block, then back.

    servelab runs its sampler and bookkeeping beside the load driver; in the
    driver's favoured group it keeps its share of that CPU instead of getting a
    hundredth of it while the driver is busy (and answers Ctrl-C at once).
    """
    if group is None:
        yield
        return
    original = _own_cgroup(group)
    (group.path / "cgroup.procs").write_text(str(os.getpid()))
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            (original / "cgroup.procs").write_text(str(os.getpid()))


def _own_cgroup(group: CpuGroup) -> Path:
    """The cgroup this process is in, in the hierarchy ``group`` belongs to."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (group.version == "v2" and controllers == "") or (
            group.version == "v1" and "cpu" in controllers.split(",")
        ):
            return group.path.parent / path.lstrip("/")
    return group.path.parent



def remove_cgroup(path: Path, timeout_s: float = 5.0) -> None:
    """rmdir a cgroup once its processes are gone (they were stopped by their owners).

    Only processes servelab started join its groups: one still there after
    ``timeout_s`` (a driver slow to exit after Ctrl-C on a busy machine) is killed, and
    servelab itself, if it is there, moves to the parent group, rather than leaving the
    group behind."""
    deadline = time.monotonic() + timeout_s
    cleared = False
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                if cleared:
                    raise
                _clear(path)
                cleared, deadline = True, time.monotonic() + 2.0
            time.sleep(0.05)


def _clear(path: Path) -> None:
    """Empty the group ``path``: this process to the parent group, any other killed."""
    try:
        members = [int(pid) for pid in (path / "cgroup.procs").read_text().split()]
    except OSError:
        return
    for pid in members:
        with contextlib.suppress(OSError):
            if pid == os.getpid():
                (path.parent / "cgroup.procs").write_text(str(pid))
            else:
                os.kill(pid, signal.SIGKILL)
