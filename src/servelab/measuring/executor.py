"""What the runner asks of the machine: start a stack, send load, watch it.

The runner only schedules; an executor does. :class:`HostExecutor` (``measuring/host.py``)
starts real stacks and drives them with the real load driver; tests hand the runner a
fake one (as hyperfine tests its scheduler with a mock executor).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from servelab.config.load import LoadSpec, RequestSpec, Workload
from servelab.config.stack import StackSpec
from servelab.host.cpus import CpuPlan
from servelab.observe.profile import WindowProfile
from servelab.plugins.driver import LoadDriver
from servelab.results.records import LoadMeasurement, ProcessUsage


@dataclass(frozen=True)
class Window:
    """What one measured window (a whole run, or one slice of it) produced."""

    started: str
    load: LoadMeasurement
    usage: tuple[ProcessUsage, ...]
    observed: dict[str, Any]  # RunObserver.result_fields()
    neighbour_share: float | None
    latencies_ms: tuple[float, ...] = ()  # kept only when the run is sliced
    # Each latency's weight, when they are not all alike (a switched slice's: see
    # servelab.measuring.switching.slice_answers); empty: every one counts once.
    latency_weights: tuple[float, ...] = ()
    # Where the stack and its driver ran when not on the plan's shared sets (a side-by-side
    # stack on CPUs of its own: host.cpus.plan_side_by_side); None: the CPU plan's.
    stack_cpus: str | None = None
    driver_cpus: str | None = None
    # Folded stacks of the stack's Python processes (--profile), sampled while the same
    # load drove it again right after the window; None when not profiled.
    profile: WindowProfile | None = None


# Where in its scratch directory ``measure`` leaves the driver's files of the last window
# (oha's request database: servelab.capacity reads each request's send time there).
MEASURED_DIR = "measure"


# A live stack as its executor knows it (HostExecutor: a RunningStack; the tests' fake:
# a FakeStack). The runner only hands it back to the executor that launched it.
LiveStack = TypeVar("LiveStack")


class Executor(Protocol[LiveStack]):
    """The runner's hands. ``stack`` is whatever ``launch`` yielded."""

    driver: LoadDriver
    cpu_plan: CpuPlan

    def machine_speed(self) -> float | None: ...

    def launch(
        self, spec: StackSpec, probe: RequestSpec
    ) -> AbstractContextManager[LiveStack]: ...

    def send(
        self, stack: LiveStack, workload: Workload, load: LoadSpec, scratch: Path
    ) -> LoadMeasurement:
        """Discarded load (warm-up)."""
        ...

    def measure(
        self, stack: LiveStack, workload: Workload, load: LoadSpec, scratch: Path
    ) -> Window: ...

    def measure_together(
        self, stacks: Sequence[LiveStack], workload: Workload, load: LoadSpec, scratch: Path
    ) -> list[Window]:
        """Drive every stack at the same time, one driver each (side by side)."""
        ...

    def measure_switched(
        self,
        stacks: Sequence[LiveStack],
        workload: Workload,
        load: LoadSpec,
        passes: Sequence[Sequence[int]],
        scratch: Path,
        on_pass: Callable[[int], None] | None = None,
    ) -> list[list[Window]]:
        """Drive the stacks in turns (``passes[p]``: pass p's turns, stack indices), a
        driver each kept running and switched (servelab.measuring.switching); per stack,
        one Window per pass. ``on_pass(p)`` as pass p begins."""
        ...

    def scratch(self) -> AbstractContextManager[Path]: ...

    @property
    def favoured(self) -> bool: ...

    def stopped(self) -> None:
        """A block of stacks has stopped (clean up what they left, e.g. cgroups)."""
        ...
