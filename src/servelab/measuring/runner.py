"""Runs an experiment's plan: launch, warm up, measure, store (each run's record put
together from its windows by ``slices.run_record``). No maths, no output.

Two strategies share one :class:`Runner`:

- sequential (``slices == 1``): each stack start in turn, every workload warmed up
  and measured in one piece; variants interleaved round by round;
- interleaved (``slices > 1``): whole rounds of starts alive at once; per
  workload each is warmed up, then passes drive each start for one slice, so
  that the machine's drift falls on every run alike. With a stopping rule
  (``experiment.stopping``) rounds of fresh starts are added until every
  comparison is clear or the budget is spent (see ``measure.stopping``).
"""

from __future__ import annotations

import contextlib
import random
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol

from servelab.analysis.so_far import AnalysisSoFar
from servelab.analysis.validity import BUSY_SHARE
from servelab.config.experiment import Experiment
from servelab.config.load import Workload
from servelab.host.cpus import parse_cpu_list
from servelab.measuring.executor import Executor, LiveStack, Window
from servelab.measuring.plan import (
    Launch,
    RunKey,
    launch_blocks,
    live_limit,
    pending_workloads,
    plan_launches,
    run_key,
    slice_order,
    warmup_load,
    warmup_settled,
)
from servelab.measuring.slices import merge_usage, run_record, slice_loads
from servelab.measuring.stopping import NextRound, Outlook, PrecisionRule, RoundsSoFar, SloStop
from servelab.measuring.switching import SETTLE_S, SWITCH_S, drains_in_time, turn_orders
from servelab.observe.profile import merge_profiles
from servelab.results.profiles import profile_file
from servelab.results.records import ProfileInfo, RunRecord


class RunSink(Protocol):
    """Where each finished run goes at once (servelab.results.store.ResultStore)."""

    def add(self, run: RunRecord) -> None: ...

    def write_profile(self, relative: str, stacks: dict[str, int]) -> None:
        """A run's folded stacks (--profile), written before the run that names them;
        called only for runs with profiles."""
        ...


@dataclass
class RunnerEvents:
    """Callbacks the CLI uses for progress; all optional."""

    on_launch: Callable[[Launch], None] = lambda launch: None
    on_measure: Callable[[Launch, Workload], None] = lambda launch, workload: None
    on_result: Callable[[RunRecord], None] = lambda result: None
    # A sliced run's slice k of K is about to be measured.
    on_slice: Callable[[Launch, Workload, int, int], None] = lambda launch, workload, k, n: None
    # The stopping rule decided: another round (its plan), or stop (None, with the
    # rule's outlook: what is clear and what the rest would take).
    on_round: Callable[[NextRound | None, Outlook | None], None] = lambda plan, outlook: None
    # A change of design the user should hear about, with its reason (one sentence).
    on_note: Callable[[str], None] = lambda text: None
    # What the load driver says while a run goes (LoadDriver.watch; Locust: its workers on
    # other machines, as each run's load starts), once per run and change.
    on_driver: Callable[[str], None] = lambda text: None


# Side by side, each stack is driven alone for PROBE_S before its first side-by-side
# slices of a workload (analysis.validity.BUSY_SHARE says why and how busy is busy).
PROBE_S = 1.0


@dataclass
class _LiveRun(Generic[LiveStack]):
    launch: Launch
    stack: LiveStack
    speed: float | None
    warmup_rps: list[tuple[int, float]] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    passes: list[int] = field(default_factory=list)
    together: bool | None = None  # this workload's slices measured side by side
    solo_share: float | None = None  # CPUs kept busy alone, when probed
    switched: bool | None = None  # this workload's passes driven by switched drivers


@dataclass
class Runner(Generic[LiveStack]):
    """One experiment's measurement: the shared state every strategy needs."""

    experiment: Experiment
    sink: RunSink
    executor: Executor[LiveStack]
    events: RunnerEvents = field(default_factory=RunnerEvents)
    previous: Sequence[RunRecord] = ()  # runs already stored (resume)
    clock: Callable[[], float] = time.monotonic
    results: list[RunRecord] = field(default_factory=list)
    # Only these repetitions (None: 1 to the experiment's repetitions): tune's profiled
    # starts of its finalists, some of which left the race before its last round.
    only_rounds: Sequence[int] | None = None
    # The session's analysis of the runs as they arrive, which the stopping rule asks.
    so_far: AnalysisSoFar | None = None

    def __post_init__(self) -> None:
        self.done: set[RunKey] = {
            run_key(r.variant, r.workload, r.repetition) for r in self.previous
        }
        self.slo_stop = SloStop(self.experiment.slo)
        # A side-by-side experiment measures in turns once a stack alone left its CPUs
        # idle (replayed from the stored runs on resume).
        self.apart = any(r.together is False for r in self.previous)
        self.said: set[str] = set()  # notes already said once (a profiler's problems)
        # Per workload, whether its passes in turns are switched (decided at its first
        # warm-ups, replayed from the stored runs on resume): one design per workload.
        self.switching: dict[str, bool] = {
            r.workload: r.switched for r in self.previous if r.switched is not None
        }

    @property
    def all_runs(self) -> list[RunRecord]:
        return [*self.previous, *self.results]

    def run(self) -> list[RunRecord]:
        if self.experiment.slices > 1:
            self._interleaved()
        else:
            self._sequential()
        return self.results

    # -- shared steps -------------------------------------------------------------
    def _keep(self, result: RunRecord, windows: Sequence[Window] = ()) -> None:
        """A finished run: stored at once (never lost), then reported. Its windows' profiles
        (--profile) are written first, as one file that the record names."""
        profile = merge_profiles([w.profile for w in windows if w.profile is not None])
        if profile is not None:
            for problem in profile.problems:
                if problem not in self.said:
                    self.said.add(problem)
                    self.events.on_note(problem)
            file = profile_file(result.variant, result.workload, result.repetition)
            self.sink.write_profile(file, dict(profile.stacks))
            info = ProfileInfo(
                file=file, samples=profile.samples, rate_hz=profile.rate_hz,
                masters=profile.masters, problems=profile.problems,
                concurrency=profile.concurrency, processes=merge_usage([profile.usage]),
                requests=profile.requests,
            )
            result = result.model_copy(update={"profile": info})
        self.sink.add(result)
        self.results.append(result)
        self.done.add(run_key(result.variant, result.workload, result.repetition))
        self.events.on_result(result)

    def _warm_up(
        self, stack: LiveStack, workload: Workload, scratch: Path
    ) -> list[tuple[int, float]]:
        """Warm-up rounds until throughput settles or the round budget is spent; each round's
        (requests, requests/s) is returned so the result records what was discarded."""
        warm = warmup_load(self.experiment, workload, self.executor.driver)
        rounds: list[tuple[int, float]] = []
        if warm is None:
            return rounds
        for _ in range(self.experiment.warmup.max_rounds):
            measured = self.executor.send(stack, workload, warm, scratch)
            rounds.append((measured.requests_total, measured.rps))
            if warmup_settled([rps for _, rps in rounds], self.experiment.warmup.settle_pct):
                break
        return rounds

    def _warm_up_switched(
        self, workload: Workload, members: list[_LiveRun[LiveStack]], scratch: Path
    ) -> bool:
        """Where the passes may be switched and the warm-up is a duration: every start's
        warm-up rounds as switched turns, a driver per start started at once for each
        round (rounds until each start's rate settles, as ``_warm_up``) instead of a
        driver started anew for each start, whose start-up cost more than its 0.5 s of
        load in quick. False (nothing sent) where it does not apply. Its counted turns'
        rates are the warm-up's: what ``_switched`` decides on."""
        warm = warmup_load(self.experiment, workload, self.executor.driver)
        if warm is None or warm.duration_s is None or not self._may_switch(workload, members):
            return False
        for run in members:
            run.warmup_rps = []
        settling = list(members)
        for _ in range(self.experiment.warmup.max_rounds):
            turns = turn_orders([list(range(len(settling)))], warm.duration_s)
            windows = self.executor.measure_switched(
                [run.stack for run in settling], workload, warm, turns, scratch
            )
            for run, (window,) in zip(settling, windows, strict=True):
                run.warmup_rps.append((window.load.requests_total, window.load.rps))
            settling = [
                run for run in settling
                if not warmup_settled(
                    [rps for _, rps in run.warmup_rps], self.experiment.warmup.settle_pct
                )
            ]
            if not settling:
                break
        return True

    # -- sequential ----------------------------------------------------------------
    def _sequential(self) -> None:
        for launch in plan_launches(self.experiment, self.only_rounds):
            try:
                self._measure_launch(launch)
            finally:
                self.executor.stopped()

    def _measure_launch(self, launch: Launch) -> None:
        """Start the stack once, then warm up and measure each workload not yet done."""
        todo = pending_workloads(self.experiment, launch, self.done)
        if not todo:
            return
        self.events.on_launch(launch)
        speed = self.executor.machine_speed()
        with (
            self.executor.launch(launch.stack, todo[0].request) as stack,
            self.executor.scratch() as scratch,
        ):
            for workload in todo:
                self.events.on_measure(launch, workload)
                warmup_rps = self._warm_up(stack, workload, scratch)
                window = self.executor.measure(stack, workload, workload.load, scratch)
                record = run_record(
                    self.experiment, self.executor.cpu_plan, self.executor.favoured, launch,
                    workload, [window], warmup_rps, speed,
                )
                self._keep(record, [window])
                if self.slo_stop.stops(self.all_runs, launch):
                    break  # a ramp past its breaking point: higher rates are not tried

    # -- interleaved, adaptive ----------------------------------------------------------
    def _interleaved(self) -> None:
        experiment = self.experiment
        rng = random.Random(experiment.order_seed) if experiment.order == "random" else None
        started = self.clock()
        pending = [
            launch
            for launch in plan_launches(experiment, self.only_rounds)
            if pending_workloads(experiment, launch, self.done)
        ]
        rounds = RoundsSoFar()
        for block in launch_blocks(pending, live_limit(experiment)):
            self._measure_block(block, experiment.workloads, experiment.slices, rng, rounds)
        if experiment.stopping is None:
            return
        rule = PrecisionRule(experiment, self.so_far)
        while True:
            plan = rule.next_round(self.all_runs, self.clock() - started, rounds)
            self.events.on_round(plan, rule.outlook)
            if plan is None:
                return
            repetition = max((r.repetition for r in self.all_runs), default=0) + 1
            workloads = [w for w in experiment.workloads if w.name in plan.workloads]
            launches = plan_launches(experiment, [repetition])
            self._measure_block(launches, workloads, plan.passes, rng, rounds)

    def _next_pass_number(self, workload: Workload) -> int:
        """Pass numbers are unique per workload across the experiment (resume included)."""
        return 1 + max(
            (
                s.pass_number
                for r in self.all_runs
                if r.workload == workload.name
                for s in r.slice_figures
            ),
            default=0,
        )

    def _measure_block(
        self,
        block: Sequence[Launch],
        workloads: Sequence[Workload],
        passes: int,
        rng: random.Random | None,
        rounds: RoundsSoFar,
    ) -> None:
        """Every launch of ``block`` started at once; per workload, each warmed up, then
        ``passes`` passes that drive each start for one slice. ``rounds`` learns the time."""
        began = self.clock()
        with contextlib.ExitStack() as alive, self.executor.scratch() as scratch:
            alive.callback(self.executor.stopped)  # after the block's stacks have stopped
            live: list[_LiveRun[LiveStack]] = []
            for launch in block:
                todo = pending_workloads(self.experiment, launch, self.done, workloads)
                if not todo:
                    continue
                self.events.on_launch(launch)
                speed = self.executor.machine_speed()
                stack = alive.enter_context(self.executor.launch(launch.stack, todo[0].request))
                live.append(_LiveRun(launch, stack, speed))
            rounds.add_launch(len({run.launch.repetition for run in live}), self.clock() - began)
            for workload in workloads:
                members = [
                    run
                    for run in live
                    if workload in pending_workloads(self.experiment, run.launch, self.done)
                ]
                if not members:
                    continue
                began = self.clock()
                self._slice_workload(workload, members, passes, scratch, rng)
                # In turns, a block holds several rounds: each took its share of the time.
                in_block = len({run.launch.repetition for run in members})
                rounds.add_workload(workload.name, passes * in_block, self.clock() - began)
                for run in members:
                    record = run_record(
                        self.experiment, self.executor.cpu_plan, self.executor.favoured,
                        run.launch, workload, run.windows, run.warmup_rps, run.speed,
                        run.passes, run.together, run.solo_share, run.switched,
                    )
                    self._keep(record, run.windows)

    def _may_switch(self, workload: Workload, members: list[_LiveRun[LiveStack]]) -> bool:
        """Whether this workload's passes in turns could be switched (before the rates
        decide): asked for (``switching``), a driver that can be switched, at least two
        starts, a closed load of a duration, and not already decided against."""
        load = workload.load
        return (
            self.experiment.switching
            and len(members) >= 2 and self.executor.driver.switchable
            and self.executor.driver.keep_latencies
            and load.model == "closed" and load.duration_s is not None
            and self.switching.get(workload.name) is not False
        )

    def _switched(self, workload: Workload, members: list[_LiveRun[LiveStack]]) -> bool:
        """Whether this workload's passes in turns are driven by switched drivers: it may
        be (``_may_switch``), and the starts drain a stopped driver's requests in flight
        within the settle time (their last warm-up round's rates). Decided once per
        workload, and said."""
        load = workload.load
        if not self._may_switch(workload, members):
            return False
        decided = self.switching.get(workload.name)
        if decided is not None:
            return decided
        rates = [run.warmup_rps[-1][1] for run in members if run.warmup_rps]
        if len(rates) < len(members):
            return False  # no warm-up: no rate to tell the drain time from
        switched = drains_in_time(load.concurrency, rates)
        self.switching[workload.name] = switched
        drain_s = load.concurrency / max(statistics.median(rates), 1e-9)
        self.events.on_note(
            f"{workload.name}: passes switched between the stacks every {SWITCH_S:g} s "
            f"(a load driver each, kept running), counted from {SETTLE_S:g} s after each "
            f"switch" if switched else
            f"{workload.name}: passes not switched (a load driver started anew per slice): "
            f"the median start takes {drain_s:.2f} s to serve {load.concurrency} requests "
            f"in flight, more than the {SETTLE_S:g} s a switch leaves for it"
        )
        return switched

    def _probe(
        self, members: list[_LiveRun[LiveStack]], workload: Workload, scratch: Path
    ) -> bool:
        """Drive each stack alone for a moment and keep the share of its CPUs it used;
        True when every one kept them busy (side by side stays valid), else switch the
        experiment to measuring in turns, and say why."""
        load = workload.load.model_copy(update={"duration_s": PROBE_S, "requests": None})
        for run in members:
            window = self.executor.measure(run.stack, workload, load, scratch)
            busy = sum(p.cpu_s for p in window.usage)
            seconds = window.load.duration_s or PROBE_S
            # A stack on CPUs of its own (a big machine's side-by-side slot) fills those.
            capacity = (
                float(len(parse_cpu_list(window.stack_cpus))) if window.stack_cpus
                else self.executor.cpu_plan.stack_capacity
            )
            run.solo_share = round(busy / (seconds * capacity), 3)
        idle = min(members, key=lambda run: run.solo_share or 0.0)
        if (idle.solo_share or 0.0) >= BUSY_SHARE:
            return True
        self.apart = True
        self.events.on_note(
            f"measuring in turns from here on: {idle.launch.stack.name} alone kept "
            f"{100 * (idle.solo_share or 0.0):.0f} % of its CPUs busy on {workload.name} "
            f"(below {100 * BUSY_SHARE:.0f} %: it waits on something), so requests per CPU "
            "second side by side would not be what it serves with a CPU to itself; each "
            "stack's own requests/s, measured alone, answers instead"
        )
        return False

    def _slice_workload(
        self,
        workload: Workload,
        members: list[_LiveRun[LiveStack]],
        passes: int,
        scratch: Path,
        rng: random.Random | None,
    ) -> None:
        together = self.experiment.side_by_side and not self.apart
        for run in members:
            run.windows, run.passes, run.solo_share = [], [], None
            self.events.on_measure(run.launch, workload)
        if together:  # warmed up together, as they will be measured
            with ThreadPoolExecutor(len(members), thread_name_prefix="servelab-warm") as pool:
                warmed = list(
                    pool.map(
                        lambda pair: self._warm_up(
                            pair[1].stack, workload, scratch / f"side-{pair[0]}"
                        ),
                        enumerate(members),
                    )
                )
            for run, rounds in zip(members, warmed, strict=True):
                run.warmup_rps = rounds
        elif not self._warm_up_switched(workload, members, scratch):
            for run in members:
                run.warmup_rps = self._warm_up(run.stack, workload, scratch)
        if together and not any(
            r.solo_cpu_share is not None for r in self.all_runs if r.workload == workload.name
        ):
            together = self._probe(members, workload, scratch)
        for run in members:
            run.together = together if self.experiment.side_by_side else None
        first = self._next_pass_number(workload)
        # More passes than the spec's slices (a later round may ask for them) repeat the
        # slice loads; each pass drives every start once.
        loads = slice_loads(workload.load, self.experiment.slices)
        switched = not together and self._switched(workload, members)
        for run in members:
            run.switched = switched if self.experiment.switching else None
        if switched:
            index = {id(run): i for i, run in enumerate(members)}
            orders = [
                [index[id(run)] for run in slice_order(members, pass_index, rng)]
                for pass_index in range(passes)
            ]
            turns = turn_orders(orders, loads[0].duration_s or SWITCH_S)
            switched_windows = self.executor.measure_switched(
                [run.stack for run in members], workload, loads[0], turns, scratch,
                on_pass=lambda p: self.events.on_slice(
                    members[turns[p][0]].launch, workload, p + 1, passes
                ),
            )
            for run, found in zip(members, switched_windows, strict=True):
                run.windows.extend(found)
                run.passes.extend(first + p for p in range(passes))
            return
        for pass_index in range(passes):
            load = loads[pass_index % len(loads)]
            if together:
                # Whose driver starts first rotates too (with the round's launch order).
                order = slice_order(members, pass_index, rng)
                self.events.on_slice(order[0].launch, workload, pass_index + 1, passes)
                stacks = [run.stack for run in order]
                windows = self.executor.measure_together(stacks, workload, load, scratch)
                for run, window in zip(order, windows, strict=True):
                    run.windows.append(window)
                    run.passes.append(first + pass_index)
                continue
            for run in slice_order(members, pass_index, rng):
                self.events.on_slice(run.launch, workload, pass_index + 1, passes)
                run.windows.append(self.executor.measure(run.stack, workload, load, scratch))
                run.passes.append(first + pass_index)
