"""The executor on this machine (``HostExecutor``): real stacks on their CPUs (side by
side where the machine has CPUs enough, each live stack in a slot of its own), the real
load driver, every process watched, and --profile's windows after the measured ones.
What it does for the runner: ``measuring/executor.py``; its switched passes:
``measuring/switched_passes.py``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path

from servelab.analysis.profile import sampled_per_cpu_s
from servelab.config.load import LoadSpec, RequestSpec, Workload
from servelab.config.stack import StackSpec
from servelab.host.cgroups import CpuGroup
from servelab.host.cpus import CpuPlan, SideBySidePlan, count_cpus, moved_to, parse_cpu_list
from servelab.host.procs import JANITOR
from servelab.host.running import RunningStack
from servelab.launch import launch_stack
from servelab.measuring.executor import MEASURED_DIR, Window
from servelab.measuring.switched_passes import SwitchedPasses
from servelab.observe.metrics import ProcessSampler
from servelab.observe.neighbours import NeighbourMeter, cpu_speed
from servelab.observe.observer import RunObserver
from servelab.observe.profile import StackProfiler, WindowProfile
from servelab.plugins.driver import LoadDriver, run_load
from servelab.plugins.front import LOOPBACK
from servelab.results.records import LoadMeasurement, ProcessUsage

# The roles whose processes are Python and sampled with --profile: the app server's tree.
PROFILED_ROLES = ("app",)
# In a profiling window, the other roles' processes (the front) run on the driver's CPUs.
# Sharing the app's, the worker whose write woke nginx waited for its CPU (the woken
# front ran first) and py-spy, which counts a runnable thread as running, charged the
# wait to the write. Two copies of the planted test experiment at once (300 µs, 4 starts
# each; benchmarks/why.py front, 6 copies each way): asyncio's transport write read
# 113-170 µs a request in the base, the planted spin 195-268 (interval holding 300 in 3
# of 6); with the front away, 30-44 µs and 254-318 (6 of 6).
FRONT_AWAY = True
# A crowded stack (more of the app's threads than its CPUs, at a concurrency above its
# CPUs) whose profile took CROWDED_WAITED samples per CPU second or more is profiled again
# at a concurrency of its CPUs: py-spy counts a thread that waits for a CPU as running,
# and the waits pile up in the functions that run long stretches (a planted 84
# µs/request read 273 µs with 4 workers on 1 CPU, 3.2 samples per CPU second; 53 at one
# connection, its samples scaled to the measured window's CPU, whose requests spread
# their cost otherwise). Its samples are then scaled to that window's own CPU and
# requests (``ProfileInfo.concurrency``): the functions' sizes at that load. Only then:
# quick's stacks (two workers on a CPU each) profiled so at one connection read
# differences that their measured windows contradict.
UNCROWDED = True
CROWDED_WAITED = 2.0


def uncrowded_concurrency(spec: StackSpec, stack_cpus: int, load: LoadSpec) -> int | None:
    """The concurrency a crowded stack is profiled at (``UNCROWDED``): its CPUs, when more
    of its app's threads than that could be busy at the load's concurrency (connections,
    for the open model); None when it is not crowded."""
    server = spec.server
    threads = server.workers * max(server.threads, server.blocking_threads or 1)
    busy = min(threads, load.concurrency)
    return stack_cpus if busy > stack_cpus else None


@dataclass(frozen=True)
class Groups:
    """The cgroups the stack's servers and the load driver start in (None: none)."""

    stack: CpuGroup | None
    driver: CpuGroup | None

    @property
    def favoured(self) -> bool:
        return bool(self.stack and self.stack.favoured and self.driver)

    def prune_stopped(self) -> None:
        """Remove the stopped stacks' per-server groups (else removed at the end, or by
        the janitor)."""
        if self.stack is not None:
            with contextlib.suppress(OSError):
                self.stack.prune()

    def driver_prefix(self, inside: Sequence[str]) -> list[str]:
        """The driver's argv prefix: join its cgroup, then enter the stack's namespace."""
        return [*(self.driver.wrap([]) if self.driver else []), *inside]


@contextmanager
def beside_the_driver(cpu_plan: CpuPlan) -> Iterator[None]:
    """Run servelab's own process (sampler, bookkeeping) on the driver's CPUs, not the stack's."""
    if cpu_plan.driver is None:
        yield
        return
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, parse_cpu_list(cpu_plan.driver))
    try:
        yield
    finally:
        os.sched_setaffinity(0, previous)


class HostExecutor(SwitchedPasses):
    """Real stacks on this machine, the real load driver, every process watched."""

    def __init__(
        self,
        driver: LoadDriver,
        cpu_plan: CpuPlan,
        groups: Groups,
        listen_host: str = LOOPBACK,
        side: SideBySidePlan | None = None,
        profiler: str | None = None,
        on_driver_note: Callable[[str], None] | None = None,
    ) -> None:
        self.driver = driver
        # What the driver says while it runs (LoadDriver.watch): its workers, as they start.
        self.on_driver_note = on_driver_note
        self.profiler = profiler  # py-spy's path: a profiling window after every measured one
        self.cpu_plan = cpu_plan
        self.groups = groups
        self.listen_host = listen_host
        # Side by side on a machine with CPUs enough: each live stack takes a slot of the
        # plan (its own stack CPUs, and its driver's), freed when it stops.
        self.side = side if side is not None and side.own_stack_cpus else None
        self.slots: dict[int, int] = {}  # id(running stack) -> slot

    def _slot_cpus(self, stack: RunningStack) -> tuple[str | None, str | None]:
        """(stack CPUs, driver CPUs) of ``stack``: its slot's, or the plan's."""
        slot = self.slots.get(id(stack))
        if self.side is None or slot is None:
            return self.cpu_plan.stack, self.cpu_plan.driver
        return self.side.stacks[slot], self.side.drivers[slot]

    @property
    def favoured(self) -> bool:
        return self.groups.favoured

    def machine_speed(self) -> float | None:
        # Probed on the stack's CPU before the stack exists: a running stack (even idle:
        # timers, connection teardown) would slow the probe.
        return cpu_speed(self.cpu_plan.stack)

    def launch(self, spec: StackSpec, probe: RequestSpec) -> AbstractContextManager[RunningStack]:
        if self.side is None:
            return launch_stack(
                spec, probe=probe, cpus=self.cpu_plan.stack, quota=self.groups.stack,
                listen_host=self.listen_host,
            )
        return self._launch_in_slot(spec, probe)

    @contextmanager
    def _launch_in_slot(self, spec: StackSpec, probe: RequestSpec) -> Iterator[RunningStack]:
        assert self.side is not None
        taken = set(self.slots.values())
        slot = next((i for i in range(len(self.side.stacks)) if i not in taken), None)
        if slot is None:  # more stacks alive than planned: they share the stack CPUs
            with launch_stack(
                spec, probe=probe, cpus=self.cpu_plan.stack, quota=self.groups.stack,
                listen_host=self.listen_host,
            ) as stack:
                yield stack
            return
        with launch_stack(
            spec, probe=probe, cpus=self.side.stacks[slot], quota=self.groups.stack,
            listen_host=self.listen_host,
        ) as stack:
            self.slots[id(stack)] = slot
            try:
                yield stack
            finally:
                del self.slots[id(stack)]

    @contextmanager
    def scratch(self) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix="servelab-load-") as path:
            JANITOR.watch("path", path)
            try:
                yield Path(path)
            finally:
                JANITOR.forget("path", path)

    def stopped(self) -> None:
        self.groups.prune_stopped()

    def _prefix(self, stack: RunningStack) -> list[str]:
        # In the stack's network namespace, if it has one (somaxconn studies).
        return self.groups.driver_prefix(stack.placement.driver_prefix())

    def send(
        self, stack: RunningStack, workload: Workload, load: LoadSpec, scratch: Path
    ) -> LoadMeasurement:
        return run_load(
            self.driver,
            stack.url(workload.request.path),
            workload.request,
            load,
            scratch / "warmup",
            cpus=self._slot_cpus(stack)[1],
            prefix=self._prefix(stack),
            on_note=self.on_driver_note,
        )

    def measure(
        self, stack: RunningStack, workload: Workload, load: LoadSpec, scratch: Path
    ) -> Window:
        """Drive ``stack`` with ``load`` once, watching its processes, logs and CPUs."""
        with NeighbourMeter(self.cpu_plan.stack) as neighbours:
            window = self._drive(stack, workload, load, scratch / MEASURED_DIR)
        share = neighbours.share(sum(p.cpu_s for p in window.usage))
        profile = self._profile(stack, workload, load, scratch / "profile", window.usage)
        return replace(window, neighbour_share=share, profile=profile)

    def measure_together(
        self, stacks: Sequence[RunningStack], workload: Workload, load: LoadSpec, scratch: Path
    ) -> list[Window]:
        """Drive every stack at once, a driver process each; the stacks' neighbours are
        what the stack CPUs ran besides all of them."""
        with (
            NeighbourMeter(self.cpu_plan.stack) as neighbours,
            ThreadPoolExecutor(len(stacks), thread_name_prefix="servelab-side") as pool,
        ):
            windows = list(
                pool.map(
                    lambda pair: self._drive(pair[1], workload, load, scratch / f"side-{pair[0]}"),
                    enumerate(stacks),
                )
            )
        share = neighbours.share(sum(p.cpu_s for w in windows for p in w.usage))
        if self.profiler is not None:  # driven together again, as they were measured
            with ThreadPoolExecutor(len(stacks), thread_name_prefix="servelab-side") as pool:
                profiles = list(pool.map(
                    lambda pair: self._profile(
                        pair[1], workload, load, scratch / f"side-{pair[0]}-profile",
                        windows[pair[0]].usage,
                    ),
                    enumerate(stacks),
                ))
            windows = [replace(w, profile=p) for w, p in zip(windows, profiles, strict=True)]
        return [replace(w, neighbour_share=share) for w in windows]

    def _profile(
        self, stack: RunningStack, workload: Workload, load: LoadSpec, workdir: Path,
        measured: Sequence[ProcessUsage],
    ) -> WindowProfile | None:
        """--profile: the stack's Python processes sampled by py-spy while the same load
        drives it once more, right after its measured window (whose figures py-spy's
        pauses would change: see ``servelab.observe.profile``); None when not profiling.

        In that window the front (nginx, Apache) runs on the driver's CPUs: on the app's,
        a worker whose write wakes it waits for the CPU, and py-spy counts the wait as
        the write running (``FRONT_AWAY``). A crowded stack is sampled again, uncrowded
        (``UNCROWDED``; ``measured``: the measured window's processes, whose CPU tells how
        long py-spy's threads waited)."""
        roots = {role: proc.pid for role, proc in stack.processes.items()}
        profiled = {role: pid for role, pid in roots.items() if role in PROFILED_ROLES}
        if self.profiler is None or not profiled:
            return None
        stack_cpus = self._slot_cpus(stack)[0]
        py_spy = self.profiler
        profile, _ = self._sample(stack, workload, load, workdir, roots, profiled, None, py_spy)
        cpus = count_cpus(stack_cpus)
        concurrency = uncrowded_concurrency(stack.spec, cpus, load) if UNCROWDED else None
        app_cpu_s = sum(u.cpu_s for u in measured if u.role in PROFILED_ROLES)
        waited = sampled_per_cpu_s(profile.stacks, profile.rate_hz, app_cpu_s)
        if concurrency is None or waited is None or waited < CROWDED_WAITED:
            return profile
        uncrowded = load.model_copy(update={"model": "closed", "rate": None,
                                            "concurrency": concurrency})
        again, driven = self._sample(
            stack, workload, uncrowded, workdir.with_name(f"{workdir.name}-uncrowded"), roots,
            profiled, ProcessSampler(roots), py_spy,
        )
        assert driven is not None
        return replace(again, usage=driven[0], requests=driven[1], concurrency=concurrency)

    def _sample(
        self, stack: RunningStack, workload: Workload, load: LoadSpec, workdir: Path,
        roots: dict[str, int], profiled: dict[str, int], sampler: ProcessSampler | None,
        py_spy: str,
    ) -> tuple[WindowProfile, tuple[tuple[ProcessUsage, ...], int] | None]:
        """One profiling window: py-spy on ``profiled`` while ``load`` drives the stack;
        with ``sampler``, the processes' CPU and the requests too."""
        driver_cpus = self._slot_cpus(stack)[1]
        fronts = [pid for role, pid in roots.items() if role not in PROFILED_ROLES]
        with (
            moved_to(fronts, driver_cpus) if FRONT_AWAY and driver_cpus else nullcontext(),
            sampler if sampler is not None else nullcontext(),
            StackProfiler(
                py_spy, profiled, workdir.with_name(f"{workdir.name}-py-spy"),
                load.duration_s or load.max_time_s,
            ) as profiler,
        ):
            driven = run_load(
                self.driver, stack.url(workload.request.path), workload.request, load,
                workdir, cpus=driver_cpus, prefix=self._prefix(stack),
                on_note=self.on_driver_note,
            )
        # Every server's first process is its master (the front's too, not profiled).
        profile = replace(profiler.profile(), masters=tuple(sorted(roots.values())))
        used = (sampler.usage(), driven.requests_total) if sampler is not None else None
        return profile, used

    def _drive(
        self, stack: RunningStack, workload: Workload, load: LoadSpec, workdir: Path
    ) -> Window:
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        roots = {role: proc.pid for role, proc in stack.processes.items()}
        stack_cpus, driver_cpus = self._slot_cpus(stack)
        with ProcessSampler(roots) as sampler, RunObserver(stack) as observed:
            measured = run_load(
                self.driver,
                stack.url(workload.request.path),
                workload.request,
                load,
                workdir,
                cpus=driver_cpus,
                prefix=self._prefix(stack),
                on_note=self.on_driver_note,
            )
        latencies = self.driver.latencies_ms(workdir) if self.driver.keep_latencies else ()
        return Window(
            started=started,
            load=measured,
            usage=sampler.usage(),
            observed=observed.result_fields(),  # log events, namespace, listen queue
            neighbour_share=None,
            latencies_ms=tuple(latencies),
            stack_cpus=stack_cpus if self.side is not None else None,
            driver_cpus=driver_cpus if self.side is not None else None,
        )
