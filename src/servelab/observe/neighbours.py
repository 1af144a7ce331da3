"""How much of the stack's CPUs other processes took while a run was measured.

Pinning keeps the load driver off the stack's CPUs, but not the rest of the
machine: a browser, a compiler or another test suite runs wherever the kernel
puts it, and every millisecond it spends on the stack's CPU is a millisecond
the stack does not serve (and its caches are cold after). The kernel's per-CPU
counters (/proc/stat) say how busy the stack's CPUs were; the stack's own
processes' CPU time (servelab.observe.metrics) says how much of that was the stack.
The rest, plus time the hypervisor stole, is the neighbours' share.

Interrupt and softirq time is left out on both sides: the kernel's network
work for the stack's own connections lands there, and counting it would
blame the neighbours for the stack's traffic.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from servelab.host.cpus import parse_cpu_list

PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CpuTimes:
    """Seconds the given CPUs spent running tasks, stolen by the hypervisor, and in all."""

    tasks_s: float  # user + nice + system
    steal_s: float
    total_s: float  # every state, idle included


def read_cpu_times(cpus: Iterable[int], stat_text: str | None = None) -> CpuTimes:
    """The summed counters of ``cpus`` from /proc/stat (or ``stat_text``)."""
    wanted = {f"cpu{c}" for c in cpus}
    ticks = os.sysconf("SC_CLK_TCK")
    tasks = steal = total = 0
    text = stat_text if stat_text is not None else PROC_STAT.read_text()
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] not in wanted:
            continue
        # user nice system idle iowait irq softirq steal guest guest_nice; guest
        # time is already inside user (and guest_nice inside nice).
        values = [int(v) for v in fields[1:9]] + [0] * (8 - len(fields[1:9]))
        user, nice, system, _idle, _iowait, _irq, _softirq, stolen = values
        tasks += user + nice + system
        steal += stolen
        total += sum(values)
    return CpuTimes(tasks / ticks, steal / ticks, total / ticks)


def neighbour_share(before: CpuTimes, after: CpuTimes, stack_cpu_s: float) -> float | None:
    """The share (0..1) of the CPUs' time that went to other processes and to steal."""
    total = after.total_s - before.total_s
    if total <= 0:
        return None
    others = max(0.0, (after.tasks_s - before.tasks_s) - stack_cpu_s)
    stolen = max(0.0, after.steal_s - before.steal_s)
    return min(1.0, (others + stolen) / total)


class NeighbourMeter:
    """``with NeighbourMeter("0") as meter: ...; meter.share(stack_cpu_s)``; None when
    the stack is not pinned (its CPUs are everyone's, the driver's too)."""

    def __init__(self, stack_cpus: str | None) -> None:
        self.cpus = parse_cpu_list(stack_cpus) if stack_cpus else None
        self._before: CpuTimes | None = None
        self._after: CpuTimes | None = None

    def __enter__(self) -> NeighbourMeter:
        if self.cpus is not None:
            self._before = read_cpu_times(self.cpus)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cpus is not None:
            self._after = read_cpu_times(self.cpus)

    def share(self, stack_cpu_s: float) -> float | None:
        if self._before is None or self._after is None:
            return None
        return neighbour_share(self._before, self._after, stack_cpu_s)


# One unit of the speed probe: a fixed, allocation-free amount of interpreter work.
_PROBE_UNIT = 2_000


def cpu_speed(cpus: str | None, seconds: float = 0.15, rounds: int = 3) -> float | None:
    """Units of fixed pure-Python work per second on the first of ``cpus`` (None: not pinned).

    Run before each stack starts, on its CPU while nothing of servelab's runs
    there: a machine whose own speed drifts (a virtual machine's host, frequency
    scaling) shows it here, where no neighbour on the stack's CPUs does.
    servelab's own process hops onto that CPU for the probe and back. The best
    of ``rounds`` short rounds is kept (as timeit keeps the best): a drifting
    machine slows every round, a process that happens to wake up only one.
    """
    if not cpus:
        return None
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(parse_cpu_list(cpus))})
    try:
        return max(_spin(seconds) for _ in range(rounds))
    finally:
        os.sched_setaffinity(0, previous)


def _spin(seconds: float) -> float:
    units = 0
    start = time.perf_counter()
    deadline = start + seconds
    while (now := time.perf_counter()) < deadline:
        for _ in range(_PROBE_UNIT):
            pass
        units += 1
    return units / (now - start)
