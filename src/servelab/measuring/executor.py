"""What the runner asks of the machine: start a stack, send load, watch it.

The runner only schedules; an executor does. :class:`HostExecutor` starts real
stacks and drives them with the real load driver; tests hand the runner a fake
one (as hyperfine tests its scheduler with a mock executor).
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import psutil

from servelab.analysis.profile import sampled_per_cpu_s
from servelab.config.load import LoadSpec, RequestSpec, Workload
from servelab.config.stack import StackSpec
from servelab.errors import LoadDriverError
from servelab.fronts.base import LOOPBACK
from servelab.host.cgroups import CpuGroup
from servelab.host.cpus import CpuPlan, SideBySidePlan, count_cpus, moved_to, parse_cpu_list
from servelab.host.procs import JANITOR
from servelab.host.running import RunningStack
from servelab.launch import launch_stack
from servelab.load.base import Answer, LoadDriver, run_load
from servelab.measuring.slices import merge_usage, weighted_share
from servelab.measuring.switching import (
    SETTLE_S,
    SWITCH_S,
    TAIL_S,
    Turn,
    driver_offset,
    slice_answers,
)
from servelab.observe.metrics import ProcessSampler
from servelab.observe.neighbours import NeighbourMeter, cpu_speed
from servelab.observe.observer import RunObserver
from servelab.observe.profile import StackProfiler, WindowProfile
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


class HostExecutor:
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

    def measure_switched(
        self,
        stacks: Sequence[RunningStack],
        workload: Workload,
        load: LoadSpec,
        passes: Sequence[Sequence[int]],
        scratch: Path,
        on_pass: Callable[[int], None] | None = None,
    ) -> list[list[Window]]:
        """Every stack's driver started once, stopped before it sends anything, then let
        run in its stack's turns only (SIGCONT, SIGSTOP; SIGINT after its last turn, on
        which oha stops and writes what it measured). Each turn's counted part is timed
        here, and the stack's CPU and its CPUs' neighbours read at its two ends; the
        answers in it are read from the driver's per-request record afterwards."""
        turns_needed = sum(len(p) for p in passes)
        # Long enough never to end on its own: the last turn ends it (SIGINT).
        longest = load.model_copy(
            update={"duration_s": turns_needed * SWITCH_S + 10.0, "requests": None}
        )
        pids: dict[int, int] = {}
        driven: dict[int, tuple[Window, list[Answer]]] = {}

        def drive(index: int) -> None:
            stack = stacks[index]
            workdir = scratch / f"switched-{index}"
            with RunObserver(stack) as observed:
                measured = run_load(
                    self.driver, stack.url(workload.request.path), workload.request, longest,
                    workdir, cpus=self._slot_cpus(stack)[1],
                    prefix=[*self._prefix(stack), *STOPPED_UNTIL_RESUMED],
                    on_note=self.on_driver_note,
                    on_start=lambda pid: pids.__setitem__(index, pid),
                )
            driven[index] = (
                Window(time.strftime("%Y-%m-%dT%H:%M:%S%z"), measured, (),
                       observed.result_fields(), None),
                self.driver.answers(workdir),
            )

        turns: list[Turn] = []
        usage: list[tuple[ProcessUsage, ...]] = []
        shares: list[float | None] = []
        started: list[str] = []
        last_turn = {stack: i for i, stack in enumerate(t for p in passes for t in p)}
        with ThreadPoolExecutor(len(stacks), thread_name_prefix="servelab-switch") as pool:
            futures = [pool.submit(drive, i) for i in range(len(stacks))]
            ended: set[int] = set()  # sent SIGINT after their last turn
            try:
                _wait_stopped(pids, len(stacks), futures)
                index = 0
                for pass_index, order in enumerate(passes):
                    if on_pass is not None:
                        on_pass(pass_index)
                    for stack_index in order:
                        last = last_turn[stack_index] == index
                        started.append(time.strftime("%Y-%m-%dT%H:%M:%S%z"))
                        turn, used, share = _one_turn(
                            pids[stack_index], stacks[stack_index], self.cpu_plan.stack,
                            stack_index, pass_index, last=last,
                        )
                        ended |= {stack_index} if last else set()
                        turns.append(turn)
                        usage.append(used)
                        shares.append(share)
                        index += 1
                        _raise_if_failed(
                            [f for i, f in enumerate(futures) if i not in ended]
                        )
            finally:  # whatever happened, none stays stopped: each ends (SIGINT once)
                for stack_index, pid in pids.items():
                    if stack_index not in ended:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGINT)
                            os.kill(pid, signal.SIGCONT)
            for future in futures:
                future.result()
        return [
            self._switched_windows(index, driven[index], turns, usage, shares, started,
                                   len(passes))
            for index in range(len(stacks))
        ]

    def _switched_windows(
        self,
        index: int,
        driven: tuple[Window, list[Answer]],
        turns: Sequence[Turn],
        usage: Sequence[tuple[ProcessUsage, ...]],
        shares: Sequence[float | None],
        started: Sequence[str],
        passes: int,
    ) -> list[Window]:
        """Stack ``index``'s windows, one per pass, from its driver's answers."""
        whole, answers = driven
        mine = [i for i, turn in enumerate(turns) if turn.stack == index]
        offset = driver_offset(answers, [turns[i] for i in mine])
        if offset is None:  # no turn showed its first answer: the driver's clock began
            offset = turns[mine[0]].resumed  # when it first resumed, a few ms late
        windows = []
        for pass_index in range(passes):
            here = [i for i in mine if turns[i].pass_index == pass_index]
            counted = slice_answers(
                answers, [turns[i] for i in here], offset, self.driver.name
            )
            durations = [turns[i].counted_to - turns[i].counted_from for i in here]
            windows.append(Window(
                started=started[here[0]],
                load=counted.load,
                usage=merge_usage([usage[i] for i in here]),
                # Log lines and the listen queue were watched over all the turns: they
                # go with the first pass.
                observed=whole.observed if pass_index == 0 else _quiet(whole.observed),
                neighbour_share=weighted_share([shares[i] for i in here], durations),
                latencies_ms=counted.latencies_ms,
                latency_weights=counted.weights,
            ))
        # Requests that got no answer are only counted by the driver as a whole.
        failed = whole.load.connection_errors
        if failed:
            last = windows[-1]
            windows[-1] = replace(last, load=last.load.model_copy(
                update={"connection_errors": dict(failed)}
            ))
        return windows

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


# Prepended to a switched driver's command: it stops itself (SIGSTOP) before it becomes
# the driver, so that its clock and connections begin with its stack's first turn.
STOPPED_UNTIL_RESUMED = ("sh", "-c", 'kill -STOP $$ && exec "$@"', "servelab-switched")
_STOPPED_WAIT_S = 10.0


def _raise_if_failed(futures: Sequence[Future[None]]) -> None:
    """A driver that ended on its own (an error) ends the switched passes at once."""
    for future in futures:
        if future.done():
            future.result()
            raise LoadDriverError(
                "a switched load driver ended before its last turn",
                "run again; if it repeats, measure without --switch",
            )


def _wait_stopped(pids: dict[int, int], count: int, futures: Sequence[Future[None]]) -> None:
    """Until every driver's process exists and has stopped itself."""
    deadline = time.monotonic() + _STOPPED_WAIT_S
    while time.monotonic() < deadline:
        _raise_if_failed(futures)
        if len(pids) == count and all(_stopped(pid) for pid in pids.values()):
            return
        time.sleep(0.005)
    raise LoadDriverError(
        f"the switched load drivers did not start within {_STOPPED_WAIT_S:.0f} s",
        "check that the machine is not overloaded, or measure without --switch",
    )


def _stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


def _one_turn(
    pid: int, stack: RunningStack, stack_cpus: str | None, index: int, pass_index: int,
    last: bool,
) -> tuple[Turn, tuple[ProcessUsage, ...], float | None]:
    """Stack ``index``'s driver resumed for one turn; the stack's CPU and its CPUs'
    neighbours read at the ends of the counted part; then stopped, or ended if ``last``."""
    resumed = time.monotonic()
    os.kill(pid, signal.SIGCONT)
    sampler = ProcessSampler({role: proc.pid for role, proc in stack.processes.items()})
    neighbours = NeighbourMeter(stack_cpus)
    _sleep_until(resumed + SETTLE_S)
    sampler.sample()
    neighbours.__enter__()
    counted_from = time.monotonic()
    _sleep_until(resumed + SWITCH_S - TAIL_S)
    sampler.sample()
    neighbours.__exit__()
    counted_to = time.monotonic()
    used = sampler.usage()
    _sleep_until(resumed + SWITCH_S)
    os.kill(pid, signal.SIGINT if last else signal.SIGSTOP)
    turn = Turn(index, pass_index, resumed, counted_from, counted_to)
    return turn, used, neighbours.share(sum(p.cpu_s for p in used))


def _sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))


def _quiet(observed: dict[str, Any]) -> dict[str, Any]:
    """``observed`` without what it counted (kept once, with the first pass)."""
    return {
        **observed,
        "log_events": {},
        "log_examples": {},
        "listen_queue": None,
        "notes": (),
        **({"front_requests_by_client": {}} if "front_requests_by_client" in observed else {}),
    }
