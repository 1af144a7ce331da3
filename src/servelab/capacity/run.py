"""Measuring a capacity: every variant's stack started and its throughput probed, then
the searches' trials at fixed rates in turns (a trial of each variant whose search goes
on, then again), as quick measures stacks that would share CPUs: the machine's drift
falls on every variant alike. Every trial is written as it ends (trials.jsonl), the answers
after every turn (capacity.json).

Each trial after the first runs on a fresh start of its stack (``CapacityPlan.fresh_starts``),
warmed up for WARM_UP_S: a stack's speed differs from one start to the next (the seed's
FastAPI stack held 627 req/s on two starts and 772 on a third, docs/capacity.md), and a
search on one start measures that start's capacity, whose interval need not hold the
stack's. With a start per trial, the differences between starts are part of the trials'
own noise, which the search's interval carries. ``--one-start`` measures on one start
(faster; the capacity of that start).

Between trials the stack drains: the driver waits for every request of a trial (or its
timeout), and a cool-down as long as the trial's own p99 (at least COOL_DOWN_S) lets a
queue left in the server empty before the next schedule starts, so one trial's backlog
does not spill into the next. A trial the driver could not be trusted with
(``trials.judged``) is run once more at the same rate; twice untrusted, the search for
that variant stops and says why: the driver, not the stack, reached its limit.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab.capacity.machine import MAX_WAIT_S, MachineSpeed, StartSpeed
from servelab.capacity.search import (
    CapacitySearch,
    Estimate,
    Mixed,
    Search,
    SearchSettings,
    mixed_band,
)
from servelab.capacity.slo import Slo
from servelab.capacity.trials import Trial, judged, measured_latencies
from servelab.config.experiment import Experiment
from servelab.config.load import LoadSpec, Workload
from servelab.config.run import RunOptions
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.fronts.base import LOOPBACK
from servelab.host.cpus import CpuPlan, count_cpus
from servelab.load.base import LoadDriver
from servelab.measuring.executor import MEASURED_DIR

if TYPE_CHECKING:
    from rich.console import Console

COOL_DOWN_S = 1.0
PROBE_S = 2.0  # the closed-model throughput probe that also warms the stack up
WARM_UP_S = 1.0  # a fresh start's warm-up before its trial (closed model, as the probe)
MAX_TRIAL_S = 60.0
MAX_MACHINE_WAIT_S = 600.0  # a start waiting longer is a machine to measure elsewhere
TRIALS_FILE = "trials.jsonl"
ANSWER_FILE = "capacity.json"
MARKDOWN_FILE = "capacity.md"


@dataclass(frozen=True)
class CapacityPlan:
    """How to search: the rates allowed (None: from the throughput probe), the trials."""

    slo: Slo
    start_rate: float | None = None
    max_rate: float | None = None
    min_rate: float = 1.0
    trial_s: float = 5.0
    half_width: float = 0.05
    max_trials: int = 20
    confidence: float = 0.90
    connections: int = 1000
    timeout_s: float = 10.0
    fresh_starts: bool = True  # each trial after the first on a fresh start of its stack
    machine_wait_s: float = MAX_WAIT_S  # a start waits while the machine runs slow

    def check(self) -> None:
        """SpecError (one line, with the fix) for a plan that cannot run; before anything
        starts."""
        for label, value in (("--start", self.start_rate), ("--max-rate", self.max_rate)):
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise SpecError(
                    f"{label} must be a positive rate, got {value:g}", f"e.g. {label} 100"
                )
        if not (self.min_rate > 0 and math.isfinite(self.min_rate)):
            raise SpecError(
                f"--min-rate must be positive, got {self.min_rate:g}", "e.g. --min-rate 1"
            )
        low = self.start_rate if self.start_rate is not None else self.min_rate
        if self.max_rate is not None and self.max_rate < max(low, self.min_rate):
            raise SpecError(
                f"the rate range is empty: --max-rate {self.max_rate:g} is below "
                f"{max(low, self.min_rate):g}",
                "raise --max-rate, or lower --start / --min-rate",
            )
        if not (0 <= self.machine_wait_s <= MAX_MACHINE_WAIT_S):
            raise SpecError(
                f"--machine-wait must be in [0, {MAX_MACHINE_WAIT_S:g}] seconds, got "
                f"{self.machine_wait_s:g}", "e.g. --machine-wait 60 (0: never wait)",
            )
        if not 0 < self.trial_s <= MAX_TRIAL_S:
            raise SpecError(
                f"--trial-seconds must be in (0, {MAX_TRIAL_S:g}], got {self.trial_s:g}",
                "e.g. --trial-seconds 5",
            )
        if not 0 < self.half_width < 0.5:
            raise SpecError(
                f"--half-width must be between 0 and 50 %, got {100 * self.half_width:g} %",
                "e.g. --half-width 5",
            )
        if not 3 <= self.max_trials <= 200:
            raise SpecError(f"--max-trials must be 3 to 200, got {self.max_trials}", "e.g. 20")
        if not 0.5 <= self.confidence < 1:
            raise SpecError(
                f"--confidence must be in [0.5, 1), got {self.confidence:g}", "e.g. 0.9"
            )
        if self.connections < 1 or not self.timeout_s > 0:
            raise SpecError("--connections and --timeout must be positive", "e.g. 1000 and 10")

    def settings(self, probed_rps: float | None) -> SearchSettings:
        """The search's rates: the user's, else half the probed throughput to start and
        twice it at most (a stack holds no more than it serves flat out, give or take the
        machine's drift)."""
        guess = probed_rps if probed_rps and probed_rps > 0 else 100.0
        start = self.start_rate or max(self.min_rate, guess / 2)
        high = self.max_rate or max(start, 2 * guess)
        return SearchSettings(
            start_rate=min(start, high), max_rate=high, min_rate=min(self.min_rate, start),
            # From half the probed throughput, 1.5x steps reach past it in two trials
            # without trials far past saturation (whose queues take long to drain).
            factor=1.5 if probed_rps and not self.start_rate else 2.0,
            half_width=self.half_width, max_trials=self.max_trials,
            confidence=self.confidence,
        )

    def load(self, rate: float, counted: bool = True) -> LoadSpec:
        """A trial's load: ``rate`` for the trial's length, as a request count (oha), or
        as a duration for a driver that counts none (``counted`` False: Locust)."""
        if not counted:
            return LoadSpec(
                model="open", rate=rate, duration_s=self.trial_s,
                concurrency=self.connections, timeout_s=self.timeout_s,
                max_time_s=self.trial_s + self.timeout_s + 10.0,
            )
        requests = max(2, math.ceil(rate * self.trial_s))
        return LoadSpec(
            model="open", rate=rate, requests=requests, concurrency=self.connections,
            timeout_s=self.timeout_s, max_time_s=requests / rate + self.timeout_s + 10.0,
        )


@dataclass(frozen=True)
class VariantCapacity:
    variant: str
    estimate: Estimate
    trials: tuple[Trial, ...]
    probed_rps: float | None
    stopped_because: str | None = None  # the driver could not be trusted
    first_errors_rate: float | None = None  # the lowest rate at which a request failed
    mixed: Mixed | None = None  # where held and broken trials overlap

    def to_dict(self) -> dict[str, Any]:
        e = self.estimate
        return {
            "variant": self.variant,
            "capacity_rps": e.rate,
            "interval_rps": list(e.interval) if e.interval else None,
            "highest_held_rps": e.highest_held,
            "lowest_broken_rps": e.lowest_broken,
            "below_min_rate": e.below_min,
            "above_max_rate": e.above_max,
            "trials_on_the_line": e.fitted,
            "trials": len(self.trials),
            "starts": len({t.start for t in self.trials}),
            "probed_rps": self.probed_rps,
            "first_errors_rps": self.first_errors_rate,
            "stopped_because": self.stopped_because,
            "mixed": None if self.mixed is None else {
                "low_rps": self.mixed.low, "high_rps": self.mixed.high,
                "held": self.mixed.held, "trials": self.mixed.trials,
            },
        }


class CapacityEvents:
    """What the CLI shows as a search goes: a line per trial, the answer per variant."""

    def on_variant(self, variant: str, settings: SearchSettings) -> None: ...

    def on_trial(self, trial: Trial, estimate: Estimate) -> None: ...


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
        rate = round(rate, 1)
        if plan.fresh_starts and self.trials:
            self._fresh_start(executor, workload, plan)
        trial = self._trial(executor, workload, plan, rate, keep)
        if not trial.trusted:  # once more; twice untrusted: the driver's limit
            sleep(_cool_down(trial))
            trial = self._trial(executor, workload, plan, rate, keep)
            if not trial.trusted:
                self.stopped = f"at {rate:,.1f} req/s: {'; '.join(trial.problems)}"
                self.done = True
                events.on_trial(trial, self.search.estimate())
                return trial
        self.search.tell(trial.outcome(plan.slo))
        events.on_trial(trial, self.search.estimate())
        return trial

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

    def _fresh_start(self, executor: Any, workload: Workload, plan: CapacityPlan) -> None:
        """The stack stopped and started again, and warmed up."""
        self.started.close()
        self.started = ExitStack()
        if self.machine is not None:  # before the stack exists (it would slow the probe)
            self.start_speed = self.machine.before_start()
        self.stack = self.started.enter_context(executor.launch(self.spec, workload.request))
        self.starts += 1
        executor.send(self.stack, workload, warm_up(self.spec, plan, WARM_UP_S), self.scratch)

    def answer(self) -> VariantCapacity:
        first_errors = min(
            (t.rate for t in self.trials if t.trusted and t.errors), default=None
        )
        outcomes = [t.outcome(self.slo) for t in self.trials if t.trusted]
        return VariantCapacity(
            self.spec.name, self.search.estimate(), tuple(self.trials), self.probed,
            self.stopped, first_errors, mixed_band(outcomes),
        )


def start_search(
    executor: Any,
    spec: StackSpec,
    workload: Workload,
    plan: CapacityPlan,
    resources: ExitStack,
    events: CapacityEvents,
    make_search: Callable[[SearchSettings], Search] = CapacitySearch,
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
    probed = executor.send(stack, workload, warm_up(spec, plan, PROBE_S), scratch).rps
    settings = plan.settings(probed)
    events.on_variant(spec.name, settings)
    search = VariantSearch(spec, stack, scratch, make_search(settings), probed, started,
                           plan.slo, machine=machine, start_speed=speed)
    resources.callback(lambda: search.started.close())  # whichever start runs at the end
    return search


def warm_up(spec: StackSpec, plan: CapacityPlan, seconds: float) -> LoadSpec:
    """A closed-model load as long as ``seconds``: the first start's throughput probe, and
    each fresh start's warm-up."""
    return LoadSpec(
        model="closed", concurrency=max(8, 4 * spec.server.workers),
        duration_s=seconds, timeout_s=plan.timeout_s, max_time_s=seconds + 30,
    )


def _cool_down(trial: Trial) -> float:
    return max(COOL_DOWN_S, min(10.0, trial.latency_ms.get("p99", 0.0) / 1000))


def capacity_driver(experiment: Experiment) -> LoadDriver:
    """The experiment's driver, if it can send capacity trials: at a fixed rate, keeping
    each request's intended send time (oha; Locust's built-in request scenario). A
    SpecError (one line, the fix) otherwise, and for a missing driver: before anything
    starts."""
    from servelab.registry import get_driver

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


def _cpu_share(cpu_s: float, seconds: float, cpus: str | None) -> float:
    """Of the CPUs ``cpus`` (a list such as "0-1"; None: all), the share ``cpu_s`` kept
    busy over ``seconds``."""
    return cpu_s / seconds / count_cpus(cpus) if seconds else 0.0


def run_trial(
    executor: Any, stack: Any, workload: Workload, plan: CapacityPlan, rate: float,
    variant: str, number: int, scratch: Path,
) -> Trial:
    driver = executor.driver
    load = plan.load(rate)
    if driver.unsupported(workload.request, load) is not None:  # it counts no requests
        load = plan.load(rate, counted=False)
    window = executor.measure(stack, workload, load, scratch)
    measured = window.load
    answered = len(window.latencies_ms)
    share = _cpu_share(measured.driver_cpu_s, measured.duration_s,
                       window.driver_cpus or executor.cpu_plan.driver)
    # Workers on other machines: the busiest one's process (% of a core), as they said.
    share = max([share, *(m.cpu_max_pct / 100 for m in measured.machines)])
    driver_files = scratch / MEASURED_DIR
    sent = load.requests or getattr(driver, "sent", lambda _: None)(driver_files) or answered
    send_rate = driver.send_rate(driver_files)
    # A timed driver's trial is the length of what it sent on its schedule (Locust's
    # processes each keep one, bounded by their own clocks): from what it sent.
    seconds = load.requests / rate if load.requests else (
        sent / send_rate if send_rate > 0 else plan.trial_s
    )
    trial = Trial(
        variant=variant, number=number, rate=rate, started=window.started,
        seconds=seconds, sent=sent, send_rate=send_rate, answered=answered,
        errors=max(0, sent - measured.ok_responses),
        latency_ms=measured_latencies(window.latencies_ms),
        driver_cpu_share=share, connections=plan.connections,
        delivered=getattr(driver, "delivered", lambda _: {})(driver_files),
        cpu_s={f"{p.role} {p.pid}": round(p.cpu_s, 4) for p in window.usage},
        stack_cpu_share=_cpu_share(
            sum(p.cpu_s for p in window.usage), measured.duration_s,
            window.stack_cpus or executor.cpu_plan.stack,
        ) if window.usage else None,
    )
    return judged(trial, plan.slo)


class TrialLog:
    """trials.jsonl and capacity.json in one directory: every trial appended as it ends,
    the answers rewritten after each (results are never lost to a stop)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / TRIALS_FILE

    def add(self, trial: Trial) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(trial.to_dict()) + "\n")

    def write_answer(self, header: dict[str, Any], answers: list[VariantCapacity]) -> None:
        from servelab.capacity.compare import compare_capacities

        comparisons = (
            compare_capacities(answers, header["confidence"]) if len(answers) > 1 else []
        )
        text = json.dumps({
            **header, "variants": [a.to_dict() for a in answers],
            "comparisons": [dataclasses.asdict(c) for c in comparisons],
        }, indent=2)
        tmp = self.directory / f".{ANSWER_FILE}.tmp"
        tmp.write_text(text + "\n")
        tmp.replace(self.directory / ANSWER_FILE)


def read_trials(directory: Path) -> list[Trial]:
    path = directory / TRIALS_FILE
    return [Trial.from_dict(json.loads(line)) for line in path.read_text().splitlines() if line]


def new_result_directory(results_dir: Path, name: str) -> Path:
    """results_dir/capacity-<name>-<time>/, new for each search."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = results_dir / f"capacity-{name}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = results_dir / f"capacity-{name}-{stamp}-{n}"
    path.mkdir(parents=True)
    return path


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
    make_search: Callable[[SearchSettings], Search] = CapacitySearch,
) -> list[VariantCapacity]:
    """Every variant's capacity, the baseline's first, each on one start of its stack;
    trials.jsonl, capacity.json and capacity.md in a new directory under the results
    directory (``executor_factory``: the tests' fake executor; default the host's;
    ``setup``: what was set up around the stacks, recorded with the machine's facts)."""
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
    console.print(
        f"[bold]capacity[/bold] {len(experiment.stacks)} variant(s) at {plan.slo}, "
        f"{plan.trial_s:g} s trials; {where}; results in {directory}", highlight=False,
    )
    events = ConsoleEvents(console, plan)
    workload = experiment.workloads[0]
    searches: list[VariantSearch] = []
    try:
        with JANITOR.running(), factory(driver) as executor:
            try:
                machine = MachineSpeed(executor.machine_speed, sleep, plan.machine_wait_s)
                with ExitStack() as resources:
                    for spec in experiment.stacks:
                        searches.append(start_search(
                            executor, spec, workload, plan, resources, events, make_search,
                            machine,
                        ))
                    # In turns: a trial of each variant whose search goes on, then again.
                    while not all(s.done for s in searches):
                        for search in searches:
                            trial = search.step(
                                executor, workload, plan, log.add, events, sleep
                            )
                            if trial is not None:
                                sleep(_cool_down(trial))
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


class ConsoleEvents(CapacityEvents):
    """A line per trial on the console: its rate, what it measured, the estimate so far."""

    def __init__(self, console: Console, plan: CapacityPlan) -> None:
        self.console = console
        self.plan = plan

    def on_variant(self, variant: str, settings: SearchSettings) -> None:
        self.console.print(
            f"{variant}: rates {settings.start_rate:,.0f} to {settings.max_rate:,.0f} req/s, "
            f"at most {settings.max_trials} trials", highlight=False,
        )

    def on_trial(self, trial: Trial, estimate: Estimate) -> None:
        held = "held" if trial.outcome(self.plan.slo).held else "broke"
        so_far = ""
        if estimate.interval is not None and estimate.rate is not None:
            so_far = (
                f"; so far {estimate.rate:,.0f} [{estimate.interval[0]:,.0f}, "
                f"{estimate.interval[1]:,.0f}]"
            )
        untrusted = f" (not trusted: {'; '.join(trial.problems)})" if trial.problems else ""
        if trial.delivered:
            so_far += f"; sent by {trial.by_machine()}"
        if trial.waited_s:
            so_far += (
                f"; its start waited {trial.waited_s:g} s for the machine's own speed to come "
                f"back{' (it did not: started slow)' if trial.started_slow else ''}"
            )
        self.console.print(
            f"  trial {trial.number}: {trial.rate:,.1f} req/s, p99 "
            f"{trial.latency_ms['p99']:,.1f} ms, {trial.errors} errors: {held}{untrusted}"
            f"{so_far}", highlight=False, markup=False,
        )


def write_answer_files(
    directory: Path, answers: list[VariantCapacity], plan: CapacityPlan, where: str,
    exports: Mapping[str, Path] | None = None,
) -> None:
    """capacity.md, and with trials the chart (capacity.svg, capacity.png) and
    capacity.html (the two together, self-contained); ``exports`` (--export-FORMAT):
    json the answer (capacity.json), markdown capacity.md, csv every trial."""
    import shutil

    from servelab.capacity.answer import capacity_chart, html_page, markdown, trials_csv
    from servelab.report.base import NO_MATPLOTLIB, draw_if_installed

    chart = None
    text = markdown(answers, plan.slo, plan.confidence, where)
    if any(a.trials for a in answers):
        chart = draw_if_installed(lambda: capacity_chart(answers, plan.slo, plan.confidence))
        if chart is None:
            text += f"\n{NO_MATPLOTLIB}\n"
        else:
            (directory / "capacity.svg").write_text(chart.svg)
            (directory / "capacity.png").write_bytes(chart.png)
    (directory / MARKDOWN_FILE).write_text(text)
    exports = exports or {}
    if "markdown" in exports:
        exports["markdown"].write_text(text)
    if "csv" in exports:
        exports["csv"].write_text(trials_csv(answers))
    if "json" in exports and (directory / ANSWER_FILE).is_file():
        shutil.copyfile(directory / ANSWER_FILE, exports["json"])
    (directory / "capacity.html").write_text(html_page(text, chart))
