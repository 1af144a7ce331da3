"""Runs an experiment's plan: launch, warm up, measure, store. No maths, no output.

The plan restarts the whole stack for every repetition of every variant and
interleaves variants (repetition 1 of each, then repetition 2, ...) so that
slow drift of the machine spreads over all variants instead of biasing one.
Inside one launch every workload is warmed up and then measured.
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab.cgroups import CpuGroup, cpu_group, joined
from servelab.cpus import CpuPlan, parse_cpu_list
from servelab.errors import SpecError
from servelab.load import get_driver
from servelab.load.base import LoadDriver, run_load
from servelab.metrics import ProcessSampler
from servelab.neighbours import NeighbourMeter, cpu_speed
from servelab.observe import RunObserver
from servelab.procs import JANITOR
from servelab.ramp import ramp_should_stop
from servelab.results import LoadMeasurement, ProcessUsage, RunResult
from servelab.slices import (
    merge_loads,
    merge_observed,
    merge_usage,
    slice_loads,
    weighted_share,
)
from servelab.spec import Experiment, LoadSpec, StackSpec, Workload
from servelab.stacks import launch_stack
from servelab.stacks.base import RunningStack
from servelab.store import ResultStore


@dataclass(frozen=True)
class Launch:
    """One start of one stack; every workload is measured inside it."""

    repetition: int  # 1-based
    stack: StackSpec


def plan_launches(experiment: Experiment) -> list[Launch]:
    """Interleaved order: all variants once, then again; shuffled per round on request."""
    rng = random.Random(experiment.seed)
    plan = []
    for repetition in range(1, experiment.repetitions + 1):
        round_ = list(experiment.stacks)
        if experiment.order == "random":
            rng.shuffle(round_)
        plan.extend(Launch(repetition, stack) for stack in round_)
    return plan


def run_key(variant: str, workload: str, repetition: int) -> tuple[str, str, int]:
    return (variant, workload, repetition)


@dataclass
class RunnerEvents:
    """Callbacks the CLI uses for progress; all optional."""

    on_launch: Callable[[Launch], None] = lambda launch: None
    on_measure: Callable[[Launch, Workload], None] = lambda launch, workload: None
    on_result: Callable[[RunResult], None] = lambda result: None
    # A sliced run's slice k of K is about to be measured.
    on_slice: Callable[[Launch, Workload, int, int], None] = lambda launch, workload, k, n: None


# Warm-up length for drivers that cannot stop after a request count (wrk).
WARMUP_FALLBACK_S = 2.0


def warmup_load(experiment: Experiment, workload: Workload, driver: LoadDriver) -> LoadSpec | None:
    """The discarded load sent before measuring: a request count, or a short duration when
    the driver can only run for a time."""
    if experiment.warmup.requests == 0:
        return None
    load = LoadSpec(
        concurrency=min(experiment.warmup.concurrency, workload.load.concurrency),
        requests=experiment.warmup.requests,
        keepalive=workload.load.keepalive,
        timeout_s=workload.load.timeout_s,
        max_time_s=max(60.0, workload.load.timeout_s * 2),
    )
    if driver.unsupported(workload.request, load):
        load = load.model_copy(update={"requests": None, "duration_s": WARMUP_FALLBACK_S})
    return load


@contextmanager
def _beside_the_driver(cpu_plan: CpuPlan) -> Iterator[None]:
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


@contextmanager
def _scratch_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="servelab-load-") as path:
        JANITOR.watch("path", path)
        try:
            yield Path(path)
        finally:
            JANITOR.forget("path", path)


def run_experiment(
    experiment: Experiment,
    store: ResultStore,
    cpu_plan: CpuPlan,
    *,
    events: RunnerEvents | None = None,
    done: set[tuple[str, str, int]] | None = None,
    driver: LoadDriver | None = None,
) -> list[RunResult]:
    """Measure every (variant, workload, repetition) not in ``done``; store each result."""
    events = events or RunnerEvents()
    driver = driver or get_driver(experiment.driver)
    driver.executable()  # a missing driver is an error before any stack starts
    if experiment.slices > 1:
        if not hasattr(driver, "latencies_ms"):
            raise SpecError(
                f"load driver {driver.name} cannot measure in slices (it keeps no "
                "per-request latencies to merge)",
                "use the oha driver, or leave --slices at 1",
            )
        driver.keep_latencies = True  # type: ignore[attr-defined]
    done = done or set()
    results: list[RunResult] = []
    favoured = cpu_plan.cpu_priority
    with (
        _beside_the_driver(cpu_plan),
        cpu_group(quota=cpu_plan.stack_quota, favoured=favoured, per_process=True) as stack_group,
        cpu_group(favoured=favoured) as driver_group,
        joined(driver_group),  # servelab's own sampling keeps pace with the driver
    ):
        groups = _Groups(stack_group, driver_group)
        if experiment.slices > 1:
            _measure_sliced(experiment, store, cpu_plan, groups, events, done, driver, results)
            return results
        for launch in plan_launches(experiment):
            try:
                _measure_launch(
                    experiment, launch, store, cpu_plan, groups, events, done, driver, results
                )
            finally:
                groups.prune_stopped()
    return results


@dataclass(frozen=True)
class _Groups:
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


def warmup_settled(rps: Sequence[float], settle_pct: float) -> bool:
    """True once the last two warm-up rounds differ by less than ``settle_pct`` percent."""
    if len(rps) < 2 or rps[-2] <= 0:
        return False
    return abs(rps[-1] - rps[-2]) / rps[-2] * 100 < settle_pct


def _warm_up(
    experiment: Experiment,
    workload: Workload,
    driver: LoadDriver,
    url: str,
    scratch: Path,
    cpu_plan: CpuPlan,
    prefix: Sequence[str] = (),
) -> list[tuple[int, float]]:
    """Warm-up rounds until throughput settles or the round budget is spent; each round's
    (requests, requests/s) is returned so the result records what was discarded."""
    warm = warmup_load(experiment, workload, driver)
    rounds: list[tuple[int, float]] = []
    if warm is None:
        return rounds
    for _ in range(experiment.warmup.max_rounds):
        measured = run_load(
            driver,
            url,
            workload.request,
            warm,
            scratch / "warmup",
            cpus=cpu_plan.driver,
            prefix=prefix,
        )
        rounds.append((measured.requests_total, measured.rps))
        if warmup_settled([rps for _, rps in rounds], experiment.warmup.settle_pct):
            break
    return rounds


@dataclass(frozen=True)
class _Window:
    """What one measured window (a whole run, or one slice of it) produced."""

    started: str
    load: LoadMeasurement
    usage: tuple[ProcessUsage, ...]
    observed: dict[str, Any]  # RunObserver.result_fields()
    neighbour_share: float | None
    latencies_ms: tuple[float, ...] = ()  # kept only when the run is sliced


def _measure_window(
    stack: RunningStack,
    workload: Workload,
    load: LoadSpec,
    driver: LoadDriver,
    scratch: Path,
    cpu_plan: CpuPlan,
    groups: _Groups,
) -> _Window:
    """Drive ``stack`` with ``load`` once, watching its processes, logs and CPUs."""
    url = stack.url(workload.request.path)
    # In the stack's network namespace, if it has one (somaxconn studies).
    inside = groups.driver_prefix(stack.placement.driver_prefix())
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    roots = {role: proc.pid for role, proc in stack.processes.items()}
    with (
        ProcessSampler(roots) as sampler,
        RunObserver(stack) as observed,
        NeighbourMeter(cpu_plan.stack) as neighbours,
    ):
        measured = run_load(
            driver,
            url,
            workload.request,
            load,
            scratch / "measure",
            cpus=cpu_plan.driver,
            prefix=inside,
        )
    usage = sampler.usage()
    keep = getattr(driver, "keep_latencies", False)
    latencies = driver.latencies_ms(scratch / "measure") if keep else ()  # type: ignore[attr-defined]
    return _Window(
        started=started,
        load=measured,
        usage=usage,
        observed=observed.result_fields(),  # log events, namespace, listen queue
        neighbour_share=neighbours.share(sum(p.cpu_s for p in usage)),
        latencies_ms=tuple(latencies),
    )


def _run_result(
    experiment: Experiment,
    launch: Launch,
    workload: Workload,
    windows: Sequence[_Window],
    warmup_rps: Sequence[tuple[int, float]],
    speed: float | None,
    cpu_plan: CpuPlan,
    groups: _Groups,
) -> RunResult:
    """The run's record from its one window, or from its slices merged."""
    durations = [w.load.duration_s for w in windows]
    return RunResult(
        experiment=experiment.name,
        variant=launch.stack.name,
        workload=workload.name,
        repetition=launch.repetition,
        started_at=windows[0].started,
        load=merge_loads([w.load for w in windows], [x for w in windows for x in w.latencies_ms]),
        processes=merge_usage([w.usage for w in windows]),
        stack_cpus=cpu_plan.stack,
        stack_cpu_quota=cpu_plan.stack_quota,
        driver_cpus=cpu_plan.driver,
        warmup_requests=sum(n for n, _ in warmup_rps),
        warmup_rps=tuple(rps for _, rps in warmup_rps),
        cpu_priority=groups.favoured,
        neighbour_cpu_share=weighted_share([w.neighbour_share for w in windows], durations),
        cpu_speed=speed,
        slices=len(windows),
        **merge_observed([w.observed for w in windows], durations),
    )


def _keep(
    result: RunResult, store: ResultStore, results: list[RunResult], events: RunnerEvents
) -> None:
    """A finished run: stored at once (never lost), then reported."""
    store.add(result)
    results.append(result)
    events.on_result(result)


def _pending(experiment: Experiment, launch: Launch, done: set[tuple[str, str, int]]):
    """The workloads of ``launch`` not yet measured."""
    return [
        w
        for w in experiment.workloads
        if run_key(launch.stack.name, w.name, launch.repetition) not in done
    ]


def _measure_launch(
    experiment: Experiment,
    launch: Launch,
    store: ResultStore,
    cpu_plan: CpuPlan,
    groups: _Groups,
    events: RunnerEvents,
    done: set[tuple[str, str, int]],
    driver: LoadDriver,
    results: list[RunResult],
) -> None:
    """Start the stack once, then warm up and measure each workload not yet done."""
    todo = _pending(experiment, launch, done)
    if not todo:
        return
    events.on_launch(launch)
    # The machine's own speed, probed on the stack's CPU before the stack exists: a
    # running stack (even idle: timers, connection teardown) would slow the probe.
    speed = cpu_speed(cpu_plan.stack)
    with (
        launch_stack(
            launch.stack, probe=todo[0].request, cpus=cpu_plan.stack, quota=groups.stack
        ) as stack,
        _scratch_dir() as scratch,
    ):
        for workload in todo:
            events.on_measure(launch, workload)
            inside = groups.driver_prefix(stack.placement.driver_prefix())
            url = stack.url(workload.request.path)
            warmup_rps = _warm_up(experiment, workload, driver, url, scratch, cpu_plan, inside)
            window = _measure_window(
                stack, workload, workload.load, driver, scratch, cpu_plan, groups
            )
            result = _run_result(
                experiment, launch, workload, [window], warmup_rps, speed, cpu_plan, groups
            )
            _keep(result, store, results, events)
            if ramp_should_stop(results, launch.stack.name, launch.repetition, experiment.slo):
                break  # a ramp past its breaking point: higher rates are not tried


# At most this many stacks alive at once in a sliced experiment (memory, file handles):
# whole rounds are started together up to this count.
MAX_LIVE_STACKS = 24


def launch_blocks(launches: Sequence[Launch], limit: int = MAX_LIVE_STACKS) -> list[list[Launch]]:
    """The launches in blocks of whole rounds, each block at most ``limit`` stacks (and at
    least one round, however large)."""
    rounds: dict[int, list[Launch]] = {}
    for launch in launches:
        rounds.setdefault(launch.repetition, []).append(launch)
    blocks: list[list[Launch]] = []
    for round_ in rounds.values():
        if blocks and len(blocks[-1]) + len(round_) <= limit:
            blocks[-1].extend(round_)
        else:
            blocks.append(list(round_))
    return blocks


def slice_order(members: Sequence[Any], pass_index: int, rng: random.Random | None) -> list[Any]:
    """The order one pass of slices visits the runs: rotated by one each pass (so no run is
    always first after the warm-ups), or shuffled when the experiment's order is random."""
    if rng is not None:
        order = list(members)
        rng.shuffle(order)
        return order
    shift = pass_index % len(members) if members else 0
    return [*members[shift:], *members[:shift]]


@dataclass
class _LiveRun:
    launch: Launch
    stack: RunningStack
    speed: float | None
    warmup_rps: list[tuple[int, float]] = field(default_factory=list)
    windows: list[_Window] = field(default_factory=list)


def _measure_sliced(
    experiment: Experiment,
    store: ResultStore,
    cpu_plan: CpuPlan,
    groups: _Groups,
    events: RunnerEvents,
    done: set[tuple[str, str, int]],
    driver: LoadDriver,
    results: list[RunResult],
) -> None:
    """Every pending run's stack started at once (by blocks of whole rounds); per workload,
    each warmed up, then ``experiment.slices`` passes that drive each run for one slice."""
    rng = random.Random(experiment.seed) if experiment.order == "random" else None
    pending = [launch for launch in plan_launches(experiment) if _pending(experiment, launch, done)]
    for block in launch_blocks(pending):
        with contextlib.ExitStack() as alive, _scratch_dir() as scratch:
            alive.callback(groups.prune_stopped)  # runs after the block's stacks have stopped
            live: list[_LiveRun] = []
            for launch in block:
                events.on_launch(launch)
                speed = cpu_speed(cpu_plan.stack)
                stack = alive.enter_context(
                    launch_stack(
                        launch.stack,
                        probe=_pending(experiment, launch, done)[0].request,
                        cpus=cpu_plan.stack,
                        quota=groups.stack,
                    )
                )
                live.append(_LiveRun(launch, stack, speed))
            for workload in experiment.workloads:
                members = [
                    run for run in live if workload in _pending(experiment, run.launch, done)
                ]
                _slice_workload(
                    experiment, workload, members, driver, scratch, cpu_plan, groups, events, rng
                )
                for run in members:
                    result = _run_result(
                        experiment, run.launch, workload, run.windows, run.warmup_rps,
                        run.speed, cpu_plan, groups,
                    )
                    _keep(result, store, results, events)


def _slice_workload(
    experiment: Experiment,
    workload: Workload,
    members: list[_LiveRun],
    driver: LoadDriver,
    scratch: Path,
    cpu_plan: CpuPlan,
    groups: _Groups,
    events: RunnerEvents,
    rng: random.Random | None,
) -> None:
    for run in members:
        run.windows = []
        events.on_measure(run.launch, workload)
        inside = groups.driver_prefix(run.stack.placement.driver_prefix())
        url = run.stack.url(workload.request.path)
        run.warmup_rps = _warm_up(experiment, workload, driver, url, scratch, cpu_plan, inside)
    for pass_index, load in enumerate(slice_loads(workload.load, experiment.slices)):
        for run in slice_order(members, pass_index, rng):
            events.on_slice(run.launch, workload, pass_index + 1, experiment.slices)
            run.windows.append(
                _measure_window(run.stack, workload, load, driver, scratch, cpu_plan, groups)
            )
