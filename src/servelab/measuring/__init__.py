"""Measuring an experiment: the plan, a Runner holding the shared state, an executor
that does the work on this machine, and stop rules passed in as policies."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from servelab.analysis.so_far import AnalysisSoFar
from servelab.config.experiment import Experiment
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.host.cgroups import cpu_group, joined
from servelab.host.cpus import CpuPlan, plan_side_by_side
from servelab.measuring.host import Groups, HostExecutor, beside_the_driver
from servelab.measuring.plan import Launch, plan_launches, run_key
from servelab.measuring.runner import Runner, RunnerEvents, RunSink
from servelab.plugins.driver import LoadDriver, get_driver
from servelab.plugins.front import LOOPBACK
from servelab.results.records import RunRecord

__all__ = [
    "Launch",
    "Measure",
    "Runner",
    "RunnerEvents",
    "fits_side_by_side",
    "host_executor",
    "plan_launches",
    "run_experiment",
    "run_key",
    "side_by_side_stack_size",
]


def side_by_side_stack_size(experiment: Experiment | Sequence[StackSpec]) -> int:
    """CPUs a stack gets side by side where the machine has enough: as many as the widest
    stack (of ``experiment``, or these stacks) has app workers (what it would use
    deployed)."""
    stacks = experiment.stacks if isinstance(experiment, Experiment) else experiment
    return max(stack.server.workers for stack in stacks)


def fits_side_by_side(stacks: Sequence[StackSpec], cpu_plan: CpuPlan) -> bool:
    """True where ``cpu_plan`` gives each of ``stacks`` (an experiment's) CPUs of its own
    side by side. Sharing CPUs, the stacks' switches and caches add a cost to every request
    that no stack alone pays: on this project's 2-CPU VM side by side read the cheap
    endpoints' differences about half the size each stack alone serves
    (docs/validation/quick.md)."""
    side = plan_side_by_side(cpu_plan, len(stacks), side_by_side_stack_size(stacks))
    return side.own_stack_cpus


class Measure(Protocol):
    """The measuring step a session calls (``run_experiment``; ``servelab tune`` races
    the candidates with its own; tests hand in a runner with a fake executor): measure
    what ``previous`` lacks, each finished run into ``store`` at once; ``so_far``: the
    session's analysis as runs arrive, for its stopping rule to ask."""

    def __call__(
        self,
        experiment: Experiment,
        store: RunSink,
        cpu_plan: CpuPlan,
        *,
        events: RunnerEvents | None = None,
        previous: Sequence[RunRecord] = (),
        driver: LoadDriver | None = None,
        listen_host: str = LOOPBACK,
        profiler: str | None = None,
        so_far: AnalysisSoFar | None = None,
    ) -> list[RunRecord]: ...


def run_experiment(
    experiment: Experiment,
    store: RunSink,
    cpu_plan: CpuPlan,
    *,
    events: RunnerEvents | None = None,
    previous: Sequence[RunRecord] = (),
    driver: LoadDriver | None = None,
    listen_host: str = LOOPBACK,
    profiler: str | None = None,
    rounds: Sequence[int] | None = None,
    so_far: AnalysisSoFar | None = None,
) -> list[RunRecord]:
    """Measure every (variant, workload, repetition) not in ``previous`` on this machine;
    store each result in ``store`` as soon as it is finished. ``profiler``: py-spy's path,
    to profile every measured window (``--profile``); ``rounds``: only these repetitions
    (default: 1 to the experiment's); ``so_far``: the session's analysis as runs arrive,
    which the stopping rule asks rather than analysing every run again."""
    if profiler is not None and experiment.switching:
        # py-spy samples a window of its own after each measured slice, which switched
        # passes do not have (--switch with --profile is refused before: prepare.run).
        experiment = experiment.model_copy(update={"switching": False})
    driver = driver or get_driver(experiment.driver, experiment.driver_options)
    driver.executable()  # a missing driver is an error before any stack starts
    if experiment.slices > 1:
        if not hasattr(driver, "latencies_ms"):
            raise SpecError(
                f"load driver {driver.name} cannot measure in slices (it keeps no "
                "per-request latencies to merge)",
                "use the oha driver, or pass --slices 1",
            )
        driver.keep_latencies = True
    events = events or RunnerEvents()
    with host_executor(
        driver, cpu_plan, experiment, listen_host=listen_host, profiler=profiler,
        on_driver_note=events.on_driver,
    ) as executor:
        runner = Runner(
            experiment, store, executor, events, previous, only_rounds=rounds, so_far=so_far
        )
        return runner.run()


@contextmanager
def host_executor(
    driver: LoadDriver,
    cpu_plan: CpuPlan,
    experiment: Experiment,
    *,
    listen_host: str = LOOPBACK,
    profiler: str | None = None,
    on_driver_note: Callable[[str], None] | None = None,
) -> Iterator[HostExecutor]:
    """The real executor for ``experiment`` on this machine, as every measuring step gets
    it: servelab itself beside the driver, the stack's and the driver's cgroups (favoured
    when the plan says so), side-by-side slots where the experiment asks for them."""
    favoured = cpu_plan.cpu_priority
    with (
        beside_the_driver(cpu_plan),
        cpu_group(quota=cpu_plan.stack_quota, favoured=favoured, per_process=True) as stack_group,
        cpu_group(favoured=favoured) as driver_group,
        joined(driver_group),  # servelab's own sampling keeps pace with the driver
    ):
        side = None
        if experiment.side_by_side:
            side = plan_side_by_side(
                cpu_plan, len(experiment.stacks), side_by_side_stack_size(experiment)
            )
        yield HostExecutor(
            driver, cpu_plan, Groups(stack_group, driver_group), listen_host=listen_host,
            side=side, profiler=profiler, on_driver_note=on_driver_note,
        )
