"""The plan of an experiment: which stack starts, in what order, sliced how. Pure."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from servelab.config.experiment import Experiment
from servelab.config.load import LoadSpec, Workload
from servelab.config.stack import StackSpec
from servelab.plugins.driver import LoadDriver

# At most this many stacks alive at once in a sliced experiment (memory, file handles):
# whole rounds are started together up to this count.
MAX_LIVE_STACKS = 24
# Warm-up length for drivers that cannot stop after a request count (wrk).
WARMUP_FALLBACK_S = 2.0

RunKey = tuple[str, str, int]


@dataclass(frozen=True)
class Launch:
    """One start of one stack; every workload is measured inside it."""

    repetition: int  # 1-based
    stack: StackSpec


def run_key(variant: str, workload: str, repetition: int) -> RunKey:
    return (variant, workload, repetition)


def plan_launches(experiment: Experiment, rounds: Sequence[int] | None = None) -> list[Launch]:
    """Interleaved order: all variants once, then again; shuffled per round on request.

    Side by side, each round starts with the next variant (rotated by the round's
    number): measured, the stack started second read ~1 % faster in requests per CPU
    second in 19 of 24 A/A comparisons, so no variant may always go first."""
    rng = random.Random(experiment.order_seed)
    plan: list[Launch] = []
    for repetition in rounds or range(1, experiment.repetitions + 1):
        round_ = list(experiment.stacks)
        if experiment.order == "random":
            rng.shuffle(round_)
        elif experiment.side_by_side:
            shift = (repetition - 1) % len(round_)
            round_ = [*round_[shift:], *round_[:shift]]
        plan.extend(Launch(repetition, stack) for stack in round_)
    return plan


def pending_workloads(
    experiment: Experiment, launch: Launch, done: set[RunKey], among: Sequence[Workload] = ()
) -> list[Workload]:
    """The workloads of ``launch`` (of ``among``, if given) not yet measured."""
    return [
        w
        for w in (among or experiment.workloads)
        if run_key(launch.stack.name, w.name, launch.repetition) not in done
    ]


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


def live_limit(experiment: Experiment) -> int:
    """Most stacks a sliced experiment starts together (``launch_blocks``' limit): side by
    side one round, whose stacks share the stack CPUs while measured; in turns, whole
    rounds up to MAX_LIVE_STACKS."""
    return len(experiment.stacks) if experiment.side_by_side else MAX_LIVE_STACKS


def rounds_alive_at_once(experiment: Experiment) -> int:
    """The most rounds of starts ``launch_blocks`` keeps alive together in a sliced
    experiment (at least one, however large), without building the whole plan."""
    per_block = max(1, live_limit(experiment) // len(experiment.stacks))
    return min(experiment.repetitions, per_block)


T = TypeVar("T")


def slice_order(members: Sequence[T], pass_index: int, rng: random.Random | None) -> list[T]:
    """The order one pass of slices visits the runs: rotated by one each pass (so no run is
    always first after the warm-ups), or shuffled when the experiment's order is random."""
    if rng is not None:
        order = list(members)
        rng.shuffle(order)
        return order
    shift = pass_index % len(members) if members else 0
    return [*members[shift:], *members[:shift]]


def warmup_load(experiment: Experiment, workload: Workload, driver: LoadDriver) -> LoadSpec | None:
    """The discarded load sent before measuring: a request count, or a short duration when
    the driver can only run for a time."""
    if experiment.warmup.requests == 0:
        return None
    if workload.load.model == "replay":  # the log's first seconds, at the replay's speed
        return workload.load.model_copy(update={
            "requests": None, "duration_s": experiment.warmup.duration_s or WARMUP_FALLBACK_S,
        })
    if experiment.warmup.duration_s is not None:
        return LoadSpec(
            concurrency=workload.load.concurrency,
            duration_s=experiment.warmup.duration_s,
            keepalive=workload.load.keepalive,
            timeout_s=workload.load.timeout_s,
        )
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


def warmup_settled(rps: Sequence[float], settle_pct: float) -> bool:
    """True once the last two warm-up rounds differ by less than ``settle_pct`` percent."""
    if len(rps) < 2 or rps[-2] <= 0:
        return False
    return abs(rps[-1] - rps[-2]) / rps[-2] * 100 < settle_pct
