"""The machine's speed during a measured window, read beside the load, not before it.

On a virtual machine the host's speed moves from second to second: in the same CPU
time the stack does less work (servelab's 2-CPU VM: two 1 s windows of one stack
that each got a full CPU second served 995 and 1,628 requests). A probe run between
windows (``observe.neighbours.cpu_speed``) misses what happened inside them. The gauge
here runs the whole time: a child process spinning a fixed unit of interpreter work
on the driver's CPU at the kernel's idle priority (``SCHED_IDLE``: it runs only when
nothing else there wants the CPU, so the driver and servelab's own sampling keep it),
counting units in shared memory. Units per second *of the gauge's own CPU time*
(``/proc/PID/schedstat``, nanoseconds) is the machine's speed over any stretch, read
at the window's edges. The variant cannot change it, so it may adjust a window's
figures (``analysis.nested``'s covariate) without biasing a comparison.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

from servelab.host.cpus import parse_cpu_list

# One unit of work: the same allocation-free loop as ``cpu_speed``'s.
UNIT = 2_000
# Below this much of its own CPU time in a window, the gauge's reading says nothing.
MIN_GAUGE_CPU_S = 0.05


@dataclass(frozen=True)
class GaugeReading:
    """The gauge's count of units and its own CPU time, at one moment."""

    units: int
    cpu_ns: int

    def speed_since(self, earlier: GaugeReading) -> float | None:
        """Units per CPU second between ``earlier`` and this reading; None when the gauge
        ran too little in between (its CPU was wanted by others the whole time)."""
        cpu_s = (self.cpu_ns - earlier.cpu_ns) / 1e9
        if cpu_s < MIN_GAUGE_CPU_S:
            return None
        return (self.units - earlier.units) / cpu_s


def _spin(counter: Any, cpus: frozenset[int]) -> None:  # pragma: no cover - child process
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, cpus)
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    while True:
        for _ in range(UNIT):
            pass
        counter.value += 1


class SpeedGauge:
    """``with SpeedGauge("1") as gauge: a = gauge.read(); ...; gauge.read().speed_since(a)``.

    Not pinned (``cpus`` None) or without /proc's schedstat, every reading is None."""

    def __init__(self, cpus: str | None) -> None:
        self.cpus = parse_cpu_list(cpus) if cpus else None
        self._process: multiprocessing.process.BaseProcess | None = None
        self._counter: Synchronized[int] | None = None

    def __enter__(self) -> SpeedGauge:
        if self.cpus is None:
            return self
        context = multiprocessing.get_context("fork")
        counter = context.Value("Q", 0, lock=False)
        process = context.Process(
            target=_spin, args=(counter, self.cpus), name="servelab-speed-gauge", daemon=True
        )
        process.start()
        self._process, self._counter = process, counter  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.join(timeout=5)

    def read(self) -> GaugeReading | None:
        if self._process is None or self._counter is None or self._process.pid is None:
            return None
        try:
            fields = Path(f"/proc/{self._process.pid}/schedstat").read_text().split()
        except OSError:
            return None
        return GaugeReading(int(self._counter.value), int(fields[0]))
