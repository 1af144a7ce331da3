"""Simulated systems with a known capacity, for the searches' tests and benchmarks: a
queue whose p99 grows as 1 / (saturation - rate), read with the noise of a real trial;
a replay's sender in front of it, which that queue can hold up (``SimulatedSender``);
and trials whose holding curve, P(hold | rate), is known exactly (``MarginCurve``), still
or drifting as the search goes."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from servelab.capacity.search import CapacitySearch, Estimate, Outcome, Search, SearchSettings


@dataclass(frozen=True)
class SimulatedStack:
    """p99 = base + scale / (saturation - rate) below saturation (the M/M/1 shape), the
    trial's length past it; each trial reads it times a lognormal noise of ``noise`` (its
    CV, about), and the stack's speed drifts between trials by ``drift`` (CV) as this
    project's VM does. Errors past ``errors_from`` x saturation."""

    saturation: float = 1000.0
    base_ms: float = 5.0
    scale_ms_per_s: float = 20_000.0  # scale / (saturation - rate): ms x req/s
    noise: float = 0.10
    drift: float = 0.0
    errors_from: float = 1.2
    trial_s: float = 5.0

    def p99_ms(self, rate: float, speed: float = 1.0) -> float:
        room = self.saturation * speed - rate
        if room <= 0:
            return 1000 * self.trial_s / 2
        return min(self.base_ms + self.scale_ms_per_s / room, 1000 * self.trial_s / 2)

    def capacity(self, limit_ms: float) -> float:
        """The rate where the median p99 meets ``limit_ms``."""
        return self.saturation - self.scale_ms_per_s / (limit_ms - self.base_ms)

    def probability(self, rate: float, limit_ms: float) -> float:
        """The chance that a trial at ``rate`` holds ``limit_ms`` (its holding curve): the
        p99's noise and the speed's drift integrated (the speed's log normal, on a grid
        of its quantiles)."""
        speeds = (
            [math.exp(self.drift * _NORMAL.inv_cdf((i + 0.5) / _GRID)) for i in range(_GRID)]
            if self.drift else [1.0]
        )
        return sum(self.probability_at(rate, limit_ms, s) for s in speeds) / len(speeds)

    def probability_at(self, rate: float, limit_ms: float, speed: float) -> float:
        """The chance that a trial at ``rate`` holds ``limit_ms`` on a machine of ``speed``
        (the p99's noise only)."""
        if rate > self.errors_from * self.saturation * speed:
            return 0.0
        room = math.log(limit_ms / self.p99_ms(rate, speed))
        return _NORMAL.cdf(room / self.noise) if self.noise else float(room >= 0)

    def quantile(self, share: float, limit_ms: float) -> float:
        """The rate held in ``share`` of trials."""
        return _solve(lambda r: self.probability(r, limit_ms) - share, 1e-3, 10 * self.saturation)

    def trial(
        self, rate: float, limit_ms: float, rng: random.Random, speed: float | None = None
    ) -> Outcome:
        """One trial at ``rate``; ``speed``: the machine's at it (by default drawn anew,
        independent of the trial before)."""
        if speed is None:
            speed = math.exp(rng.gauss(0, self.drift)) if self.drift else 1.0
        p99 = self.p99_ms(rate, speed) * math.exp(rng.gauss(0, self.noise))
        errors = rate > self.errors_from * self.saturation * speed
        return Outcome(rate, limit_ms / p99, errors_broke=errors)


@dataclass(frozen=True)
class SimulatedSender:
    """A replay's sender in front of a SimulatedStack, as trials.Sender tells them apart:
    its CPU time grows with the rate it sends (``cpu_per_request_s`` on one CPU), and it
    keeps at most ``connections`` requests out. Past its CPU it falls behind by itself;
    past the stack's edge its requests wait on the stack until every connection is busy
    (by Little's law, the rate times the latency), and then it falls behind waiting on
    them: the stack held it up."""

    connections: int = 1000
    cpu_per_request_s: float = 50e-6  # a CPU full at 20,000 req/s
    lag_ms: float = 0.5  # its send lag's p99 when it keeps up

    def cpu_share(self, rate: float) -> float:
        return min(1.0, rate * self.cpu_per_request_s)

    def peak_in_flight(self, rate: float, p99_ms: float) -> int:
        return min(self.connections, math.ceil(rate * p99_ms / 1000))

    def lag_p99_ms(self, rate: float, p99_ms: float, saturated: float = 0.9) -> float:
        """Its send lag's p99: the share of the latency it waited for a free connection
        (where the requests due outnumber its connections), or, its CPU full, as long as
        a request waits behind the ones it had no time for."""
        wanted = rate * p99_ms / 1000  # the requests Little's law would have out
        lag = self.lag_ms
        if wanted > self.connections:
            lag += p99_ms * (1 - self.connections / wanted)
        if self.cpu_share(rate) >= saturated:
            lag += 1000 * rate * self.cpu_per_request_s  # its whole second behind, roughly
        return lag


@dataclass
class SlowSpells:
    """``stack``'s trials with the machine's speed in spells: its log an AR(1) over the
    trials, correlated ``memory`` from one to the next, with the stack's own ``drift`` as
    its spread (so the holding curve, the speed integrated, is the stack's). A search's
    trials then share a slow or fast spell, as this VM's do for minutes at a time."""

    stack: SimulatedStack
    memory: float
    rng: random.Random
    log_speed: float | None = None

    def trial(self, rate: float, limit_ms: float) -> Outcome:
        spread = self.stack.drift
        if self.log_speed is None:
            self.log_speed = self.rng.gauss(0, spread)
        else:
            fresh = self.rng.gauss(0, spread * math.sqrt(1 - self.memory**2))
            self.log_speed = self.memory * self.log_speed + fresh
        return self.stack.trial(rate, limit_ms, self.rng, math.exp(self.log_speed))


def simulate(
    stack: SimulatedStack, limit_ms: float, settings: SearchSettings, seed: int,
    make_search: Callable[[SearchSettings], Search] = CapacitySearch,
) -> tuple[Estimate, int]:
    """One search on ``stack``: its estimate and the trials it took."""
    rng = random.Random(seed)
    search = make_search(settings)
    trials = 0
    while (rate := search.next_rate()) is not None:
        search.tell(stack.trial(rate, limit_ms, rng))
        trials += 1
    return search.estimate(), trials


_NORMAL = NormalDist()
_GRID = 400


def _solve(f: Callable[[float], float], low: float, high: float) -> float:
    """The root of a falling ``f`` in [low, high], by bisection in log."""
    for _ in range(100):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if f(mid) > 0 else (low, mid)
    return math.sqrt(low * high)


@dataclass(frozen=True)
class MarginCurve:
    """Trials whose log margin is a - b log(rate) + N(0, s^2): their holding curve is
    P(hold | rate) = Phi((a - b log rate) / s) exactly. ``drift``: a moves by that much a
    trial (the stack slowing, or speeding up, as the search goes); the holding curve
    then is the average over the search's trials. Margins are returned unclipped (the
    fit clips them)."""

    a: float
    b: float
    s: float
    drift: float = 0.0

    @classmethod
    def of(cls, half: float, band: float, s: float, move: float = 0.0,
           hold: float = 0.9) -> MarginCurve:
        """The curve held half of the time at ``half`` req/s, whose rate held in ``hold`` of
        trials is ``band`` times lower, with a log margin's noise ``s``; ``move``: the
        relative change of the rates a trial (-0.003: 0.3 % slower each trial)."""
        b = s * _NORMAL.inv_cdf(hold) / math.log(band)
        return cls(b * math.log(half), b, s, b * move)

    def score(self, rate: float, index: int = 0) -> float:
        return (self.a + self.drift * index - self.b * math.log(rate)) / self.s

    def trial(self, rate: float, rng: random.Random, index: int = 0) -> Outcome:
        """Trial number ``index`` (0, 1, ...) of a search, at ``rate``."""
        log_margin = self.s * self.score(rate, index) + rng.gauss(0, self.s)
        return Outcome(rate, math.exp(log_margin))

    def probability(self, rate: float, trials: int = 1) -> float:
        """P(hold | rate), averaged over trials 0 .. ``trials`` - 1."""
        return sum(_NORMAL.cdf(self.score(rate, i)) for i in range(trials)) / trials

    def quantile(self, share: float, trials: int = 1) -> float:
        """The rate held in ``share`` of trials 0 .. ``trials`` - 1."""
        centre = math.exp(self.a / self.b)
        return _solve(lambda r: self.probability(r, trials) - share, centre / 100, centre * 100)


def run_search(
    search: Search, trial: Callable[[float, int], Outcome], limit: int = 1000
) -> list[Outcome]:
    """Trials as ``search`` places them (``trial(rate, index)``) until it stops."""
    outcomes: list[Outcome] = []
    while (rate := search.next_rate()) is not None and len(outcomes) < limit:
        outcome = trial(rate, len(outcomes))
        search.tell(outcome)
        outcomes.append(outcome)
    return outcomes


def coverage(truths: Sequence[float], intervals: Sequence[tuple[float, float] | None]) -> float:
    """The share of ``intervals`` that hold their truth (no interval: not held)."""
    held = sum(i is not None and i[0] <= t <= i[1] for t, i in zip(truths, intervals, strict=True))
    return held / len(truths)
