"""Issue "Capacity under an SLO": does `servelab capacity`'s interval hold the capacity,
how wide is it, how many trials and how long does it take, and how does it compare with a
linear ramp and with doubling-then-bisection? Prints figures; asserts nothing.

    .venv/bin/python benchmarks/capacity.py simulate [--searches 400]
    .venv/bin/python benchmarks/capacity.py bimodal [--searches 100]
    .venv/bin/python benchmarks/capacity.py steady --stack fastapi --rate 1450 [--trials 40]
        [--one-start]
    .venv/bin/python benchmarks/capacity.py real --stack sleepy|fastapi [--searches 10]
        [--sweep-passes 5] [--sweep-rates 15] [--sweep-from 0.85] [--sweep-to 1.10]
        [--baselines 3] [--repeat K] [--interleave] [--out DIR]

- simulate: simulated queues with a known capacity (servelab.capacity.simulated), soft
  and sharp knees, p99 noise 5-20 %, machine drift 0-5 % between trials: coverage of the
  90 % interval, median half-width, trials; and the two baselines at the same precision.
- bimodal: a simulated stack whose starts either hold or collapse, as the seed's FastAPI
  stack did here (a start collapses with a chance rising as a normal curve through 1,873
  req/s, width 230; a held one is a queue saturating at 2,600 with a p99 noise of 50 %):
  how often the search's interval holds the rate held half of the time, and a probit fit
  of held / broken (``held_half``) on the same trials.
- steady: where one stack's spread at one rate comes from: --trials trials at --rate,
  each on a fresh start with the machine's speed probed before it (a fixed CPU loop on
  the stack's CPU; --one-start: every trial on one start); held / broken against that
  speed, and whether collapses come in runs; each trial's stack CPU (ms a request, the
  share of its CPU busy, how the app's processes split it), held against broken.
- real: one stack, at p99 < 100 ms, errors < 0.1 %:
  1. ground truth: a dense sweep, --sweep-rates rates from --sweep-from to --sweep-to x
     a first search's estimate, each pass measuring every rate once in a shuffled order,
     each trial on a fresh start of the stack (capacity's default since its fresh starts;
     a pass was one start before), --sweep-passes passes; the same line fitted to all its
     trials (the clipped log margin against the rate), its crossing and 90 % interval;
     and, for a stack whose trials at one rate either hold easily or break badly (the
     line then fits neither), the rate held half of the time: a probit fit of held /
     broken against the rate, its 90 % profile-likelihood interval;
  2. --searches capacity searches (`servelab capacity`, each a fresh start): how often the
     interval holds the truth's point, the median half-width, trials and wall time; with
     --interleave, spread between the sweep's passes (the truth and the searches then
     meet the same hours of a machine whose speed drifts), not after them;
  3. --baselines searches each of a linear ramp (from half the probed throughput, steps of
     10 % of the truth: +-5 % resolution) and of doubling-then-bisection (until the
     bracket is within +-5 %), one trial per step: the same figures.

Stacks: "sleepy" is servelab's default capacity stack (the sleepy app, 10 ms per request,
on gunicorn sync with 2 workers, behind nginx over a unix socket); "fastapi" is the seed's
FastAPI app on uvicorn (2 workers), POST /async/items/ with the seed's item body. Each
measurement holds /tmp/servelab-cpu.lock (flock); stack on CPU 0, load driver on CPU 1
(servelab's default plan).
"""

from __future__ import annotations

import argparse
import fcntl
import io
import itertools
import math
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from servelab import api
from servelab.capacity import CapacityPlan, capacity_experiment, parse_slo
from servelab.capacity.search import (
    CapacitySearch,
    Estimate,
    Outcome,
    SearchSettings,
    clipped_log,
    crossing,
)
from servelab.capacity.simulated import SimulatedStack
from servelab.config.run import RunOptions, UserApp
from servelab.measuring.ramp import stack_dict
from servelab.prepare.building import experiment_from_dict
from servelab.studies.seeds import SEED_ITEM_BODY

LOCK = "/tmp/servelab-cpu.lock"
SLO = parse_slo("p99<100ms,errors<0.1%")
LIMIT_MS = 100.0
SIM_CASES = [  # (scale ms x req/s, p99 noise, drift between trials)
    (20_000.0, 0.05, 0.0), (20_000.0, 0.10, 0.0), (20_000.0, 0.20, 0.0),
    (20_000.0, 0.10, 0.05), (4_000.0, 0.10, 0.0), (4_000.0, 0.10, 0.03),
    (4_000.0, 0.20, 0.05),
]


# -- the baselines, placing trials as the users' scripts do --------------------------------


@dataclass
class LinearRamp:
    """`servelab ramp` / k6's stepped ramp: start, +step, ... until the first broken trial;
    the capacity is the last held rate, its bracket [last held, first broken]."""

    settings: SearchSettings
    step: float
    outcomes: list[Outcome] = field(default_factory=list)

    def next_rate(self) -> float | None:
        if not self.outcomes:
            return self.settings.start_rate
        last = self.outcomes[-1]
        if not last.held or last.rate >= self.settings.max_rate:
            return None
        return min(self.settings.max_rate, last.rate + self.step)

    def tell(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def estimate(self) -> Estimate:
        return _bracket(self.outcomes)


@dataclass
class DoublingBisection:
    """Double until a trial breaks the SLO, then bisect on held / broken until the bracket
    is within +-half_width of its middle (one trial a step, as hand-rolled scripts and
    Nighthawk do)."""

    settings: SearchSettings
    outcomes: list[Outcome] = field(default_factory=list)
    low: float | None = None
    high: float | None = None

    def next_rate(self) -> float | None:
        if not self.outcomes:
            return self.settings.start_rate
        if self.high is None:
            if self.low is not None and self.low >= self.settings.max_rate:
                return None
            return min(self.settings.max_rate, 2 * (self.low or self.settings.start_rate))
        if self.low is None:
            rate = self.high / 2
            return rate if rate >= self.settings.min_rate else None
        middle = (self.low + self.high) / 2
        if (self.high - self.low) / 2 <= self.settings.half_width * middle:
            return None
        return middle

    def tell(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        if outcome.held:
            self.low = outcome.rate
        else:
            self.high = outcome.rate

    def estimate(self) -> Estimate:
        if self.low is None or self.high is None:
            return _bracket(self.outcomes)
        middle = (self.low + self.high) / 2
        return Estimate(middle, (min(self.low, self.high), max(self.low, self.high)),
                        self.low, self.high)


@dataclass
class Repeated:
    """A baseline made surer the way users do it ("5 repetitions per step"): each rate it
    asks for is tried ``times`` times (odd), and it is told the median trial's answer (by
    margin, a trial broken by errors counting as 0): held when most held."""

    inner: LinearRamp | DoublingBisection
    times: int
    outcomes: list[Outcome] = field(default_factory=list)
    pending: list[Outcome] = field(default_factory=list)

    def next_rate(self) -> float | None:
        return self.pending[0].rate if self.pending else self.inner.next_rate()

    def tell(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        self.pending.append(outcome)
        if len(self.pending) == self.times:
            ranked = sorted(self.pending, key=lambda o: 0.0 if o.errors_broke else o.margin)
            self.inner.tell(ranked[self.times // 2])
            self.pending = []

    def estimate(self) -> Estimate:
        return self.inner.estimate()


def _bracket(outcomes: list[Outcome]) -> Estimate:
    held = [o.rate for o in outcomes if o.held]
    broken = [o.rate for o in outcomes if not o.held]
    if not held or not broken:
        return Estimate(max(held) if held else None, None, max(held, default=None),
                        min(broken, default=None))
    low, high = max(held), min(broken)
    return Estimate(low, (min(low, high), max(low, high)), low, high)


@dataclass
class FixedRates:
    """The ground truth's sweep: every rate given, once each, in the order given."""

    settings: SearchSettings
    rates: list[float]
    outcomes: list[Outcome] = field(default_factory=list)

    def next_rate(self) -> float | None:
        return self.rates[len(self.outcomes)] if len(self.outcomes) < len(self.rates) else None

    def tell(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def estimate(self) -> Estimate:
        return _bracket(self.outcomes)


# -- simulated ------------------------------------------------------------------------------


def _run_search(search, stack: SimulatedStack, rng: random.Random) -> tuple[Estimate, int]:
    while (rate := search.next_rate()) is not None:
        search.tell(stack.trial(rate, LIMIT_MS, rng))
    return search.estimate(), len(search.outcomes)


def _summary(label: str, truth: float, results: list[tuple[Estimate, int]],
             truth_interval: tuple[float, float] | None = None) -> str:
    covered = [e.interval is not None and e.interval[0] <= truth <= e.interval[1]
               for e, _ in results]
    widths = [e.relative_half_width for e, _ in results if e.relative_half_width is not None]
    trials = [n for _, n in results]
    expected = ""
    if truth_interval is not None:
        share = _expected_coverage(truth_interval, [e.interval for e, _ in results])
        expected = f" (if calibrated: {share:.2f}, the truth being {_width(truth_interval)})"
    return (
        f"  {label:<22} coverage {sum(covered) / len(results):.2f}{expected}  half-width "
        f"median {100 * statistics.median(widths) if widths else math.nan:5.1f} %  trials "
        f"median {statistics.median(trials):4.1f} (max {max(trials)})"
    )


def _width(interval: tuple[float, float]) -> str:
    low, high = interval
    return f"+-{100 * (high - low) / (high + low):.1f} %"


def _expected_coverage(
    truth_interval: tuple[float, float], intervals: list[tuple[float, float] | None],
    confidence: float = 0.90,
) -> float:
    """How often calibrated intervals would hold a truth that is itself an estimate: each
    search's error and the truth's add (normal, their half-widths at ``confidence``), so a
    90 % interval holds a truth as uncertain as itself about 75 % of the time."""
    from scipy.stats import norm

    z = norm.ppf(0.5 + confidence / 2)
    truth_sd = (truth_interval[1] - truth_interval[0]) / 2 / z
    shares = []
    for interval in intervals:
        if interval is None:
            shares.append(0.0)
            continue
        sd = (interval[1] - interval[0]) / 2 / z
        shares.append(2 * norm.cdf(z * sd / math.hypot(sd, truth_sd)) - 1)
    return sum(shares) / len(shares)


def simulate(searches: int) -> None:
    print(f"simulated queues, {searches} searches each, the 90 % interval at p99 < 100 ms")
    for scale, noise, drift in SIM_CASES:
        stack = SimulatedStack(scale_ms_per_s=scale, noise=noise, drift=drift)
        truth = stack.capacity(LIMIT_MS)
        settings = SearchSettings(start_rate=0.45 * stack.saturation,
                                  max_rate=1.8 * stack.saturation, factor=1.5, max_trials=20)
        print(f"knee {100 * (1 - truth / stack.saturation):.0f} % below saturation, noise "
              f"{100 * noise:g} %, drift {100 * drift:g} %: capacity {truth:,.0f}")
        found = {}
        for label, make in (
            ("capacity search", CapacitySearch),
            ("linear ramp (10 %)", lambda s, step=0.1 * truth: LinearRamp(s, step)),
            ("doubling-bisection", DoublingBisection),
            # The baselines steadied by repeating each step: what equal coverage costs.
            *((f"ramp (10 %) x{k}", lambda s, k=k, step=0.1 * truth: Repeated(
                LinearRamp(s, step), k)) for k in (3, 5)),
            *((f"ramp (5 %) x{k}", lambda s, k=k, step=0.05 * truth: Repeated(
                LinearRamp(s, step), k)) for k in (3, 5)),
            *((f"doubling-bisection x{k}", lambda s, k=k: Repeated(DoublingBisection(s), k))
              for k in (3, 5)),
        ):
            results = [
                _run_search(make(settings), stack, random.Random(seed))
                for seed in range(searches)
            ]
            found[label] = results
            print(_summary(label, truth, results))
        print(_equal_precision(truth, found))


def _equal_precision(truth: float, found: dict[str, list[tuple[Estimate, int]]]) -> str:
    """The fewest trials a baseline spent (median) while holding the truth at least as
    often as the search, with a median half-width no wider than its, against the
    search's: how many times faster the search is at equal precision."""
    def figures(results: list[tuple[Estimate, int]]) -> tuple[float, float, float]:
        held = sum(e.interval is not None and e.interval[0] <= truth <= e.interval[1]
                   for e, _ in results) / len(results)
        widths = [e.relative_half_width for e, _ in results
                  if e.relative_half_width is not None]
        return (held, statistics.median(widths) if widths else math.inf,
                statistics.median(n for _, n in results))

    coverage, width, trials = figures(found.pop("capacity search"))
    matching = {label: figures(r)[2] for label, r in found.items()
                if figures(r)[0] >= coverage and figures(r)[1] <= width * 1.05}
    if not matching:
        return ("  at equal precision: no baseline held the truth as often with intervals as "
                "narrow")
    label = min(matching, key=matching.__getitem__)
    return (f"  at equal precision: {label}, {matching[label]:g} trials against the search's "
            f"{trials:g}: the search {matching[label] / trials:.1f}x fewer")


BIMODAL_CENTRE, BIMODAL_WIDTH, BIMODAL_SATURATION = 1873.0, 230.0, 2600.0


def bimodal_trial(rate: float, rng: random.Random) -> Outcome:
    from scipy.stats import norm

    if rng.random() < norm.cdf((rate - BIMODAL_CENTRE) / BIMODAL_WIDTH):
        p99 = math.exp(rng.uniform(math.log(120), math.log(900)))  # a collapsed start
    else:
        room = BIMODAL_SATURATION - rate
        p99 = (5 + 20_000 / room if room > 0 else 2500) * math.exp(rng.gauss(0, 0.5))
    return Outcome(rate, LIMIT_MS / p99)


def bimodal(searches: int) -> None:
    intervals = held = probit = probit_held = 0
    widths, probit_widths, trials = [], [], []
    for seed in range(searches):
        rng = random.Random(seed)
        search = CapacitySearch(SearchSettings(start_rate=800, max_rate=4000, max_trials=20))
        while (rate := search.next_rate()) is not None:
            search.tell(bimodal_trial(rate, rng))
        e = search.estimate()
        trials.append(len(search.outcomes))
        if e.interval and e.relative_half_width is not None:
            intervals += 1
            held += e.interval[0] <= BIMODAL_CENTRE <= e.interval[1]
            widths.append(e.relative_half_width)
        centre, interval = held_half([o.rate for o in search.outcomes],
                                     [o.held for o in search.outcomes])
        if centre and interval:
            probit += 1
            probit_held += interval[0] <= BIMODAL_CENTRE <= interval[1]
            probit_widths.append((interval[1] - interval[0]) / 2 / centre)
    print(f"bimodal stack, held half of the time at {BIMODAL_CENTRE:g} req/s; {searches} searches")
    print(f"  search: an interval in {intervals}, holding it in {held}; half-width median "
          f"{100 * statistics.median(widths):.1f} %; trials median {statistics.median(trials)}")
    print(f"  probit on the same trials: an interval in {probit}, holding it in {probit_held}; "
          f"half-width median {100 * statistics.median(probit_widths):.1f} %")


# -- real -----------------------------------------------------------------------------------


def _experiment(stack: str):
    if stack == "sleepy":
        built = stack_dict("sleepy", None, "gunicorn", None, 2, "unix")
        request = {"method": "GET", "path": "/"}
    else:
        built = stack_dict("fastapi", None, "uvicorn", None, 2, "unix")
        request = {"method": "POST", "path": "/async/items/", "body": SEED_ITEM_BODY,
                   "headers": {"Content-Type": "application/json"}}
    return experiment_from_dict(capacity_experiment(f"bench-{stack}", [built], request),
                                source="benchmark")


def measure_search(
    stack: str, out: Path, user: UserApp = UserApp(), **measuring  # noqa: B008 (frozen)
) -> tuple[object, float]:
    """One search (a fresh start of the stack) under the machine lock: its answer and
    its wall time (from taking the lock). ``user``: the user's app in place of the
    stack's (`capacity --app`)."""
    plan = measuring.pop("plan", CapacityPlan(slo=SLO))
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        began = time.monotonic()
        [answer] = api.capacity(
            _experiment(stack), plan, RunOptions(results_dir=out), user,
            console=Console(file=io.StringIO()), out=Console(file=io.StringIO()), **measuring,
        )
        return answer, time.monotonic() - began


def held_half(
    rates: list[float], held: list[bool], confidence: float = 0.9
) -> tuple[float | None, tuple[float, float] | None]:
    """The rate held in half of the trials, P(held | r) = Phi((c - r) / s) fitted by
    maximum likelihood, and c's profile-likelihood interval (Wilks: twice the
    log-likelihood's drop within chi2(1) at ``confidence``); None where the trials do
    not bracket it (all held, or none)."""
    from scipy import optimize, stats

    if all(held) or not any(held):
        return None, None
    floor_s = 1e-3 * statistics.median(rates)

    def loglik(c: float, s: float) -> float:
        p = stats.norm.cdf([(c - r) / s for r in rates]).clip(1e-12, 1 - 1e-12)
        pairs = zip(p, held, strict=True)
        return float(sum(math.log(q) if h else math.log(1 - q) for q, h in pairs))

    def best_s(c: float) -> float:
        fit = optimize.minimize_scalar(lambda log_s: -loglik(c, math.exp(log_s)),
                                       bounds=(math.log(floor_s), math.log(max(rates))),
                                       method="bounded")
        return -float(fit.fun)

    fit = optimize.minimize_scalar(lambda c: -best_s(c), bounds=(min(rates), max(rates)),
                                   method="bounded")
    centre, top = float(fit.x), -float(fit.fun)
    cut = top - stats.chi2.ppf(confidence, 1) / 2
    grid = [min(rates) + (max(rates) - min(rates)) * i / 400 for i in range(401)]
    inside = [centre, *(c for c in grid if best_s(c) >= cut)]
    return centre, (min(inside), max(inside))


def real(stack: str, searches: int, passes: int, n_rates: int, baselines: int, out: Path,
         sweep: tuple[float, float] = (0.85, 1.10), interleave: bool = False,
         repeat: int = 0) -> None:
    print(f"stack {stack}, SLO {SLO}; results under {out}")
    first, seconds = measure_search(stack, out)
    centre = first.estimate.rate
    print(f"first search: {centre:,.1f} {first.estimate.interval} in {len(first.trials)} "
          f"trials, {seconds:.0f} s")
    low, high = sweep
    rates = [round(centre * (low + (high - low) * i / (n_rates - 1)), 1) for i in range(n_rates)]
    trials = []
    between: list[tuple[object, float]] = []  # --interleave: the searches, with the passes
    for k in range(passes):
        order = rates[:]
        random.Random(k).shuffle(order)
        answer, seconds = measure_search(
            stack, out, plan=CapacityPlan(slo=SLO, max_trials=200),
            make_search=lambda s, order=order: FixedRates(s, order),
        )
        trials += [t for t in answer.trials if t.trusted]
        print(f"sweep pass {k + 1}/{passes}: {len(answer.trials)} trials, {seconds:.0f} s")
        # The searches spread between the passes, so that the truth and the searches
        # meet the same hours of a machine whose speed drifts.
        for _ in range(searches // passes + (k < searches % passes) if interleave else 0):
            between.append(measure_search(stack, out))
            e = between[-1][0].estimate
            print(f"  capacity search: {e.rate} {e.interval} {len(between[-1][0].trials)} "
                  f"trials {between[-1][1]:.0f} s", flush=True)
    truth, interval = crossing([t.rate for t in trials],
                               [clipped_log(t.outcome(SLO).margin) for t in trials], 0.9,
                               level=0.0)
    held = {r: sum(t.outcome(SLO).held for t in trials if t.rate == r) for r in rates}
    print(f"ground truth: {truth:,.1f} req/s, 90 % interval {interval} from {len(trials)} "
          f"trials; held per rate: " + ", ".join(f"{r:g}:{n}/{passes}" for r, n in held.items()))
    half, half_interval = held_half([t.rate for t in trials],
                                    [t.outcome(SLO).held for t in trials])
    print(f"held half of the time (probit): {half} 90 % {half_interval}")
    for t in sorted(trials, key=lambda t: t.rate):
        print(f"  trial {t.rate:g} req/s: p50 {t.latency_ms['p50']:.1f} p99 "
              f"{t.latency_ms['p99']:.1f} ms, errors {t.errors}, start {t.start}")
    step = 0.1 * (half or truth)
    longer = CapacityPlan(slo=SLO, max_trials=200)  # a repeated baseline runs past 20 trials
    for label, make, n, plan in (
        ("capacity search", None, searches, None),
        ("linear ramp (10 %)", lambda s: LinearRamp(s, step), baselines, None),
        ("doubling-bisection", DoublingBisection, baselines, None),
        # --repeat: the baselines steadied by repeating each step (simulate's "equal
        # precision"), a finer ramp among them.
        *(((f"ramp (5 %) x{repeat}", lambda s: Repeated(LinearRamp(s, step / 2), repeat),
            baselines, longer),
           (f"doubling-bisection x{repeat}",
            lambda s: Repeated(DoublingBisection(s), repeat), baselines, longer))
          if repeat else ()),
    ):
        results, walls = [], []
        if make is None and between:  # measured between the passes
            results = [(answer.estimate, len(answer.trials)) for answer, _ in between]
            walls = [seconds for _, seconds in between]
            n = 0
        for _ in range(n):
            answer, seconds = measure_search(
                stack, out, **({"make_search": make} if make else {}),
                **({"plan": plan} if plan else {}),
            )
            results.append((answer.estimate, len(answer.trials)))
            walls.append(seconds)
            e = answer.estimate
            print(f"  {label}: {e.rate} {e.interval} {len(answer.trials)} trials {seconds:.0f} s",
                  flush=True)
        if results and half is not None:
            print(_summary(label + " (probit)", half, results, half_interval))
        if results and truth is not None:
            print(_summary(label, truth, results, interval)
                  + f"  wall median {statistics.median(walls):.0f} s "
                  f"(range {min(walls):.0f}-{max(walls):.0f})")


def _stack_cpu(trial) -> str:
    """The stack's CPU per request, its share of the trial's time, and each app process's
    share of the app's CPU (how the workers split the load)."""
    if trial.stack_cpu_ms_per_request is None:
        return ""
    busy = sum(trial.cpu_s.values()) / trial.seconds
    app = sorted((v for k, v in trial.cpu_s.items() if k.startswith("app ")), reverse=True)
    split = "/".join(f"{100 * v / sum(app):.0f}" for v in app) if sum(app) else "-"
    return (f"  cpu {trial.stack_cpu_ms_per_request:.3f} ms/req, busy {100 * busy:.0f} %, "
            f"app split {split} %")


def steady(stack: str, rate: float, trials: int, out: Path, one_start: bool = False) -> None:
    """Where a stack's spread at one rate comes from: ``trials`` trials at ``rate``, each on
    a fresh start with the machine's speed probed before it (``one_start``: all on one,
    to tell a start's share of the spread from the trials'). Held or broken against that
    speed (Mann-Whitney; Spearman of the log margin), and whether collapses come in runs
    (the number of runs of held / broken in trial order against its expectation)."""
    from scipy import stats

    answer, seconds = measure_search(
        stack, out, plan=CapacityPlan(slo=SLO, max_trials=trials + 1,
                                      fresh_starts=not one_start),
        make_search=lambda s: FixedRates(s, [rate] * trials),
    )
    done = [t for t in answer.trials if t.trusted and t.cpu_speed is not None]
    print(f"stack {stack}: {len(done)} trials at {rate:g} req/s, {seconds:.0f} s; "
          f"results under {out}")
    for t in done:
        print(f"  {t.number:3d} {t.started}  speed {t.cpu_speed:8,.0f}  p50 "
              f"{t.latency_ms['p50']:7.1f}  p99 {t.latency_ms['p99']:7.1f} ms  sent at "
              f"{t.send_rate:7.1f}  {'held' if t.outcome(SLO).held else 'BROKE'}"
              + (f"  (waited {t.waited_s:g} s{', slow' if t.started_slow else ''})"
                 if t.waited_s else "") + _stack_cpu(t))
    held = [t.outcome(SLO).held for t in done]
    speeds = [t.cpu_speed for t in done]
    print(f"held {sum(held)} of {len(held)}; speed median {statistics.median(speeds):,.0f} "
          f"({min(speeds):,.0f}-{max(speeds):,.0f}, CV "
          f"{100 * statistics.stdev(speeds) / statistics.mean(speeds):.1f} %)")
    up = [v for v, h in zip(speeds, held, strict=True) if h]
    down = [v for v, h in zip(speeds, held, strict=True) if not h]
    if up and down:
        test = stats.mannwhitneyu(up, down)
        print(f"speed held median {statistics.median(up):,.0f}, broken "
              f"{statistics.median(down):,.0f}; Mann-Whitney p = {test.pvalue:.3g}")
    rho = stats.spearmanr(speeds, [clipped_log(t.outcome(SLO).margin) for t in done])
    print(f"Spearman (speed, log margin) {rho.statistic:+.2f}, p = {rho.pvalue:.3g}")
    cpu = [t.stack_cpu_ms_per_request for t in done]
    if None not in cpu and len(cpu) > 1:
        print(f"stack CPU per request {statistics.mean(cpu):.3f} ms, CV "
              f"{100 * statistics.stdev(cpu) / statistics.mean(cpu):.1f} % over the trials")
    if None not in cpu and up and down:
        cpu_up = [c for c, h in zip(cpu, held, strict=True) if h]
        cpu_down = [c for c, h in zip(cpu, held, strict=True) if not h]
        test = stats.mannwhitneyu(cpu_up, cpu_down)
        print(f"stack CPU per request held median {statistics.median(cpu_up):.3f} ms, broken "
              f"{statistics.median(cpu_down):.3f} ms; Mann-Whitney p = {test.pvalue:.3g}")
    n1, n2 = sum(held), len(held) - sum(held)
    if n1 and n2:
        runs = 1 + sum(a != b for a, b in itertools.pairwise(held))
        expected = 1 + 2 * n1 * n2 / (n1 + n2)
        variance = (2 * n1 * n2 * (2 * n1 * n2 - n1 - n2)
                    / ((n1 + n2) ** 2 * (n1 + n2 - 1)))
        z = (runs - expected) / math.sqrt(variance) if variance > 0 else math.nan
        print(f"runs of held / broken: {runs} against {expected:.1f} expected "
              f"(z = {z:+.2f}; below 0: they come in runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    sim = commands.add_parser("simulate")
    sim.add_argument("--searches", type=int, default=400)
    two = commands.add_parser("bimodal")
    two.add_argument("--searches", type=int, default=100)
    measured = commands.add_parser("real")
    measured.add_argument("--stack", choices=["sleepy", "fastapi"], default="sleepy")
    measured.add_argument("--searches", type=int, default=10)
    measured.add_argument("--sweep-passes", type=int, default=5)
    measured.add_argument("--sweep-rates", type=int, default=15)
    measured.add_argument("--sweep-from", type=float, default=0.85)
    measured.add_argument("--sweep-to", type=float, default=1.10)
    measured.add_argument("--baselines", type=int, default=3)
    measured.add_argument("--repeat", type=int, default=0, metavar="K",
                          help="also the baselines with each step tried K times (odd): a "
                          "ramp of 5 %% steps and doubling-bisection")
    measured.add_argument("--interleave", action="store_true",
                          help="the searches between the sweep's passes, not after them")
    measured.add_argument("--out", type=Path)
    one_rate = commands.add_parser("steady")
    one_rate.add_argument("--stack", choices=["sleepy", "fastapi"], default="fastapi")
    one_rate.add_argument("--rate", type=float, required=True)
    one_rate.add_argument("--trials", type=int, default=40)
    one_rate.add_argument("--out", type=Path)
    one_rate.add_argument("--one-start", action="store_true",
                          help="every trial on one start of the stack (default: fresh starts)")
    args = parser.parse_args()
    if args.command == "steady":
        steady(args.stack, args.rate, args.trials,
               args.out or Path(tempfile.mkdtemp(prefix="servelab-capacity-bench-")),
               args.one_start)
        return
    if args.command == "simulate":
        simulate(args.searches)
        return
    if args.command == "bimodal":
        bimodal(args.searches)
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="servelab-capacity-bench-"))
    real(args.stack, args.searches, args.sweep_passes, args.sweep_rates, args.baselines, out,
         (args.sweep_from, args.sweep_to), args.interleave, args.repeat)


if __name__ == "__main__":
    sys.exit(main())
