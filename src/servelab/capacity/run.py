"""Measuring a capacity: every variant's stack started and its throughput probed, then
the searches' trials at fixed rates in turns (a trial of each variant whose search goes
on, then again), as quick measures stacks that would share CPUs: the machine's drift
falls on every variant alike. Every trial is written as it ends (trials.jsonl), the answers
after every turn (capacity.json).

Each trial after the first runs on a fresh start of its stack (``CapacityPlan.fresh_starts``),
warmed up for WARM_UP_S: a stack's speed differs from one start to the next (the seed's
FastAPI stack held 627 req/s on two starts and 772 on a third, docs/validation/capacity.md), and a
search on one start measures that start's capacity, whose interval need not hold the
stack's. With a start per trial, the differences between starts are part of the trials'
own noise, which the search's interval carries. ``--one-start`` measures on one start
(faster; the capacity of that start).

Between trials the stack drains: the driver waits for every request of a trial (or its
timeout), and a cool-down as long as the trial's own p99 (at least COOL_DOWN_S) lets a
queue left in the server empty before the next schedule starts, so one trial's backlog
does not spill into the next. A trial the driver could not be trusted with
(``trials.judged``) is run once more at the same rate; twice untrusted, the search for
that variant stops and says why: the driver, not the stack, reached its limit. Where the
driver ran out of CPU (a replay's sender that fell behind with CPU to spare, twice), the
search goes on below that rate instead (``SENDER_ROOM``), and the answer says how far the
driver could go and how to split it; a stack that held the sender up is no such limit:
its trial is broken (``trials.Sender``).

A search has a budget of wall time (``CapacityPlan.budget_s``, --budget): no trial starts
that would end past it (its length, and the most the start, warm-up and cool-down of a
trial took so far), and the starts' waits for the machine's speed count against it, each
bounded by what the budget leaves and all of them by WAIT_SHARE of it. The answer is
then what the trials so far say, and says that the budget ended it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab.capacity.events import CapacityEvents, ConsoleEvents
from servelab.capacity.files import (
    MARKDOWN_FILE,
    TrialLog,
    new_result_directory,
    write_answer_files,
)
from servelab.capacity.machine import MachineSpeed, StartSpeed
from servelab.capacity.measured import run_trial
from servelab.capacity.plan import CapacityPlan, VariantCapacity
from servelab.capacity.quantile import QuantileSearch
from servelab.capacity.search import (
    Search,
    SearchSettings,
    mixed_band,
)
from servelab.capacity.slo import Slo
from servelab.capacity.trials import Sender, Trial
from servelab.config.experiment import Experiment
from servelab.config.load import LoadSpec, Workload
from servelab.config.run import RunOptions
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.host.cpus import CpuPlan
from servelab.plugins.driver import LoadDriver
from servelab.plugins.front import LOOPBACK
from servelab.traffic.schedule import ScheduleSize, schedule_size

if TYPE_CHECKING:
    from rich.console import Console

COOL_DOWN_S = 1.0
PROBE_S = 2.0  # the closed-model throughput probe that also warms the stack up
WARM_UP_S = 1.0  # a fresh start's warm-up before its trial (closed model, as the probe)
# Where the driver ran out of CPU at a rate, the search goes on below this share of it: the
# driver's CPU time grows with the rate it sends, so there it would keep at most about this
# share of its CPUs busy, under analysis.checks.DRIVER_SATURATED with room for the noise.
SENDER_ROOM = 0.8
WAIT_SHARE = 0.2  # of a search's budget, its starts may spend waiting for the machine
RECENT_STEPS = 3


@dataclass
class VariantSearch:
    """One variant's search on its running stack, a trial at a time, so that the variants'
    trials can go in turns (the machine's drift then falls on all of them alike)."""

    spec: StackSpec
    stack: Any  # what the executor's launch yielded
    scratch: Path
    search: Search
    probed: float | None
    started: ExitStack  # the running start of the stack (closed for a fresh one)
    slo: Slo
    trials: list[Trial] = field(default_factory=list)
    stopped: str | None = None  # the driver could not be trusted
    done: bool = False
    machine: MachineSpeed | None = None  # None: the machine's speed is not probed
    starts: int = 1
    start_speed: StartSpeed = field(default_factory=lambda: StartSpeed(None))  # the running start's
    traffic: ScheduleSize | None = None  # a replay's: what 1x is
    # How the search is made again with a lower highest rate (below the driver's limit).
    settings: SearchSettings | None = None
    make_search: Callable[[SearchSettings], Search] | None = None
    sender_limit: float | None = None  # the lowest rate at which the driver ran out of CPU
    limits: int = 0  # the times the search was made again below the driver's limit
    overheads: list[float] = field(default_factory=list)  # each step's, beyond its schedules
    spent_s: float = 0.0  # wall time so far: its start and probe, trials, cool-downs, waits
    overhead_s: float = 0.0  # the most a trial took beyond its schedule (start, warm-up...)
    waited_s: float = 0.0  # of it, waiting for the machine's speed
    step_waited_s: float = 0.0  # of the step under way
    budget_spent: bool = False

    def amount(self, rate: float) -> str:
        """A rate as the console says it: "8.00x" for a replay's speed, else req/s."""
        return f"{rate:,.2f}x" if self.traffic is not None else f"{rate:,.1f} req/s"

    def schedule_s(self, rate: float, plan: CapacityPlan) -> float:
        """How long a trial's schedule at ``rate`` lasts."""
        if self.traffic is not None:
            return self.traffic.duration_s / rate
        return plan.trial_s

    def _fits(self, rate: float, plan: CapacityPlan) -> bool:
        """Whether a trial at ``rate`` ends within the budget (the first always runs)."""
        if plan.budget_s is None or not self.trials:
            return True
        return self.spent_s + self.schedule_s(rate, plan) + self.overhead_s <= plan.budget_s

    def step(
        self, executor: Any, workload: Workload, plan: CapacityPlan,
        keep: Callable[[Trial], None], events: CapacityEvents,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Trial | None:
        """The next trial (twice at one rate when the first is not trusted, the stack
        drained between them), or None when the search is over."""
        rate = None if self.done else self.search.next_rate()
        if rate is None:
            self.done = True
            return None
        # A rate to a tenth of a request/s; a replay's speed to a hundredth, as it is
        # printed (never 0: 1/32x is 0.03x).
        rate = max(0.01, round(rate, 2)) if self.traffic is not None else round(rate, 1)
        if not self._fits(rate, plan):
            self._out_of_budget(plan, events)
            return None
        if plan.fresh_starts and self.trials:
            self._fresh_start(executor, workload, plan, rate)
        trial = self._trial(executor, workload, plan, rate, keep)
        if not trial.trusted and trial.sender is not Sender.OUT_OF_CPU:  # once more
            if not self._fits(rate, plan):
                events.on_trial(trial, self.search.estimate())
                self._out_of_budget(plan, events)
                return trial
            sleep(_cool_down(trial))
            trial = self._trial(executor, workload, plan, rate, keep)
        if not trial.trusted:
            events.on_trial(trial, self.search.estimate())
            if trial.sender in (Sender.OUT_OF_CPU, Sender.STARVED):
                self._below_the_driver(trial, events)
            else:  # twice untrusted: the driver's limit
                self.stopped = f"at {self.amount(rate)}: {'; '.join(trial.problems)}"
                self.done = True
            return trial
        self.search.tell(trial.outcome(plan.slo))
        events.on_trial(trial, self.search.estimate())
        return trial

    def _out_of_budget(self, plan: CapacityPlan, events: CapacityEvents) -> None:
        self.budget_spent = self.done = True
        events.on_note(self.spec.name, (
            f"its budget of {plan.budget_s:g} s is spent ({self.spent_s:.0f} s so far, "
            f"{len(self.trials)} trials): the answer is what they say"
        ))

    def _below_the_driver(self, trial: Trial, events: CapacityEvents) -> None:
        """The driver ran out of CPU at ``trial``'s rate: the search made again below it
        (SENDER_ROOM of it at most) and told the trusted trials so far; or stopped, where
        that is below the lowest rate allowed, or the driver sent none of the rates tried
        twice over."""
        rate = trial.rate
        self.sender_limit = min(rate, self.sender_limit or rate)
        self.limits += 1
        ceiling = rate * SENDER_ROOM
        trusted = [t for t in self.trials if t.trusted]
        settings = self.settings
        why = "; ".join(trial.problems)
        if settings is None or self.make_search is None or ceiling < settings.min_rate or (
            not trusted and self.limits >= 2
        ):
            self.stopped = f"at {self.amount(rate)}: {why}"
            self.done = True
            return
        self.settings = dataclasses.replace(
            settings, max_rate=ceiling, start_rate=min(settings.start_rate, ceiling),
        )
        self.search = self.make_search(self.settings)
        for kept in trusted:
            self.search.tell(kept.outcome(self.slo))
        events.on_note(self.spec.name, (
            f"the load driver could not send {self.amount(rate)} ({why}): searching below "
            f"{self.amount(ceiling)}"
        ))

    def _trial(
        self, executor: Any, workload: Workload, plan: CapacityPlan, rate: float,
        keep: Callable[[Trial], None],
    ) -> Trial:
        trial = run_trial(
            executor, self.stack, workload, plan, rate, self.spec.name, len(self.trials) + 1,
            self.scratch,
        )
        began = self.start_speed
        trial = dataclasses.replace(
            trial, start=self.starts, cpu_speed=began.speed, waited_s=began.waited_s,
            started_slow=began.slow,
        )
        keep(trial)
        self.trials.append(trial)
        return trial

    def _fresh_start(
        self, executor: Any, workload: Workload, plan: CapacityPlan, rate: float
    ) -> None:
        """The stack stopped and started again, and warmed up; before it, a wait while
        the machine runs slow, as long as the budget leaves room for it and the trial."""
        self.started.close()
        self.started = ExitStack()
        if self.machine is not None:  # before the stack exists (it would slow the probe)
            limit = None
            if plan.budget_s is not None:
                left = plan.budget_s - self.spent_s - self.schedule_s(rate, plan)
                limit = max(0.0, min(left - self.overhead_s,
                                     WAIT_SHARE * plan.budget_s - self.waited_s))
            self.start_speed = self.machine.before_start(limit)
            self.waited_s += self.start_speed.waited_s
            self.step_waited_s += self.start_speed.waited_s
        self.stack = self.started.enter_context(executor.launch(self.spec, workload.request))
        self.starts += 1
        warm = (
            replay_warm_up(workload.load, WARM_UP_S) if workload.load.model == "replay"
            else warm_up(self.spec, plan, WARM_UP_S)
        )
        executor.send(self.stack, workload, warm, self.scratch)

    def took(self, seconds: float, trials: int) -> None:
        """A step of ``seconds`` of wall time that ran the last ``trials`` trials: spent,
        and what a trial takes beyond its schedule (its start, warm-up, cool-down, the
        reading of its figures; not a wait for the machine, bounded on its own) kept at
        its most over the last RECENT_STEPS (a trial far past the edge drains long; those
        near it less)."""
        self.spent_s += seconds
        if trials:
            ran = self.trials[-trials:]
            beyond = seconds - self.step_waited_s - sum(t.seconds for t in ran)
            self.overheads.append(beyond / trials)
            self.overhead_s = max(self.overheads[-RECENT_STEPS:])
        self.step_waited_s = 0.0

    def answer(self) -> VariantCapacity:
        first_errors = min(
            (t.rate for t in self.trials if t.trusted and t.errors), default=None
        )
        outcomes = [t.outcome(self.slo) for t in self.trials if t.trusted]
        curve = getattr(self.search, "curve", None)  # a search on the holding curve
        return VariantCapacity(
            self.spec.name, self.search.estimate(), tuple(self.trials), self.probed,
            self.stopped, first_errors, mixed_band(outcomes), self.traffic,
            curve() if curve is not None else None, sender_limit=self.sender_limit,
            budget_spent_s=self.spent_s if self.budget_spent else None,
            seconds=self.spent_s,
        )


def start_search(
    executor: Any,
    spec: StackSpec,
    workload: Workload,
    plan: CapacityPlan,
    resources: ExitStack,
    events: CapacityEvents,
    make_search: Callable[[SearchSettings], Search] | None = None,
    machine: MachineSpeed | None = None,
) -> VariantSearch:
    """``spec``'s stack started (until ``resources`` closes), warmed up and its throughput
    probed, and its search set up from the probe (``make_search``: the search, or another
    way to place trials, as benchmarks/capacity.py compares them; ``machine``: each start
    waits while the machine runs slow)."""
    started = ExitStack()
    speed = machine.before_start() if machine is not None else StartSpeed(None)
    stack = started.enter_context(executor.launch(spec, workload.request))
    scratch = resources.enter_context(executor.scratch())
    traffic = None  # a replay's: what 1x is, and how long its log lasts
    if workload.load.schedule is not None:
        traffic = schedule_size(Path(workload.load.schedule))
    if traffic is not None:  # a replay: its speed is searched, from the log's own
        executor.send(stack, workload, replay_warm_up(workload.load, PROBE_S), scratch)
        probed, settings = None, plan.replay_settings(traffic.duration_s)
    else:
        probed = executor.send(stack, workload, warm_up(spec, plan, PROBE_S), scratch).rps
        settings = plan.settings(probed)
    events.on_variant(spec.name, settings)
    searching = make_search or holding_search(plan)
    search = VariantSearch(spec, stack, scratch, searching(settings), probed, started,
                           plan.slo, machine=machine, start_speed=speed, traffic=traffic,
                           settings=settings, make_search=searching)
    resources.callback(lambda: search.started.close())  # whichever start runs at the end
    return search


def warm_up(spec: StackSpec, plan: CapacityPlan, seconds: float) -> LoadSpec:
    """A closed-model load as long as ``seconds``: the first start's throughput probe, and
    each fresh start's warm-up."""
    return LoadSpec(
        model="closed", concurrency=max(8, 4 * spec.server.workers),
        duration_s=seconds, timeout_s=plan.timeout_s, max_time_s=seconds + 30,
    )


def holding_search(plan: CapacityPlan) -> Callable[[SearchSettings], Search]:
    """The search on the holding curve, for the rate held in ``plan.hold`` of trials
    (servelab.capacity.curve): the default way to place trials."""
    return lambda settings: QuantileSearch(settings, hold=plan.hold)


def replay_warm_up(schedule: LoadSpec, seconds: float) -> LoadSpec:
    """The log's first ``seconds`` at its own speed: a replay's warm-up (its driver sends
    replays only)."""
    return schedule.model_copy(update={"requests": None, "duration_s": seconds, "speed": 1.0})


def _cool_down(trial: Trial) -> float:
    return max(COOL_DOWN_S, min(10.0, trial.latency_ms.get("p99", 0.0) / 1000))


def capacity_driver(experiment: Experiment) -> LoadDriver:
    """The experiment's driver, if it can send capacity trials: at a fixed rate, keeping
    each request's intended send time (oha; Locust's built-in request scenario). A
    SpecError (one line, the fix) otherwise, and for a missing driver: before anything
    starts."""
    from servelab.plugins.driver import get_driver

    driver = get_driver(experiment.driver, experiment.driver_options)
    driver.executable()
    if not hasattr(driver, "send_rate") or not getattr(driver, "scheduled", True):
        what = driver.locustfile_label() if hasattr(driver, "locustfile_label") else "it"
        raise SpecError(
            f"load driver {driver.name} cannot send on a schedule and keep each request's "
            f"intended send time with {what}",
            "use oha, or Locust's built-in request scenario (leave --locustfile out)",
        )
    return driver


def measure_capacities(
    experiment: Experiment,
    cpu_plan: CpuPlan,
    options: RunOptions,
    plan: CapacityPlan,
    *,
    console: Console,
    out: Console,
    executor_factory: Callable[[LoadDriver], AbstractContextManager[Any]] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    setup: Mapping[str, Any] | None = None,
    make_search: Callable[[SearchSettings], Search] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[VariantCapacity]:
    """Every variant's capacity, the baseline's first, each on one start of its stack;
    trials.jsonl, capacity.json and capacity.md in a new directory under the results
    directory (``executor_factory``: the tests' fake executor; default the host's;
    ``setup``: what was set up around the stacks, recorded with the machine's facts;
    ``clock``: what each search's budget is counted on, seconds)."""
    from servelab.capacity.answer import cpu_line, variant_line
    from servelab.capacity.compare import compare_capacities
    from servelab.host.procs import JANITOR
    from servelab.measuring import host_executor
    from servelab.prepare.environment import collect_environment

    driver = capacity_driver(experiment)
    driver.keep_latencies = True
    listen = options.listen or LOOPBACK
    factory = executor_factory or (
        lambda d: host_executor(d, cpu_plan, experiment, listen_host=listen)
    )
    directory = new_result_directory(options.results_dir, experiment.name)
    log = TrialLog(directory)
    where = f"measured on {cpu_plan.describe()}"
    header = {
        "experiment": experiment.name, "slo": str(plan.slo), "confidence": plan.confidence,
        "trial_s": plan.trial_s, "fresh_starts": plan.fresh_starts, "where": where,
        "environment": collect_environment(setup) if executor_factory is None else {},
    }
    replay = any(w.load.model == "replay" for w in experiment.workloads)
    # A replay's trial lasts its log over the speed tried, not plan.trial_s.
    trials = "trials as long as the log at each speed" if replay else f"{plan.trial_s:g} s trials"
    console.print(
        f"[bold]capacity[/bold] {len(experiment.stacks)} variant(s) at {plan.slo}, "
        f"{trials}; {where}; results in {directory}", highlight=False,
    )
    events = ConsoleEvents(console, plan, replay=replay)
    workload = experiment.workloads[0]
    searches: list[VariantSearch] = []
    try:
        with JANITOR.running(), factory(driver) as executor:
            try:
                machine = MachineSpeed(executor.machine_speed, sleep, plan.machine_wait_s)
                with ExitStack() as resources:
                    for spec in experiment.stacks:
                        began = clock()
                        search = start_search(
                            executor, spec, workload, plan, resources, events, make_search,
                            machine,
                        )
                        search.took(clock() - began, 0)
                        search.overhead_s = search.spent_s  # a trial's start, until one ran
                        searches.append(search)
                    # In turns: a trial of each variant whose search goes on, then again.
                    while not all(s.done for s in searches):
                        for search in searches:
                            began, ran = clock(), len(search.trials)
                            trial = search.step(
                                executor, workload, plan, log.add, events, sleep
                            )
                            if trial is not None:
                                sleep(_cool_down(trial))
                            search.took(clock() - began, len(search.trials) - ran)
                        log.write_answer(header, [s.answer() for s in searches])
            finally:
                executor.stopped()
    finally:
        answers = [s.answer() for s in searches]
        if answers:
            log.write_answer(header, answers)
        write_answer_files(directory, answers, plan, where, dict(options.result_files))
    for answer in answers:
        out.print(variant_line(answer, plan.slo, plan.confidence), highlight=False)
        ran_out = cpu_line(answer, plan.slo)
        if ran_out is not None:
            out.print(f"  {ran_out}", highlight=False)
    for comparison in compare_capacities(answers, plan.confidence) if len(answers) > 1 else ():
        out.print(comparison.describe(answers[0].variant), highlight=False)
    out.print(f"capacity: {directory / MARKDOWN_FILE}", highlight=False)
    return answers
