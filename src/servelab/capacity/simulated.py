"""Simulated systems with a known capacity, for the search's tests and benchmarks: a
queue whose p99 grows as 1 / (saturation - rate), read with the noise of a real trial."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from servelab.capacity.search import CapacitySearch, Estimate, Outcome, SearchSettings


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

    def trial(self, rate: float, limit_ms: float, rng: random.Random) -> Outcome:
        speed = math.exp(rng.gauss(0, self.drift)) if self.drift else 1.0
        p99 = self.p99_ms(rate, speed) * math.exp(rng.gauss(0, self.noise))
        errors = rate > self.errors_from * self.saturation * speed
        return Outcome(rate, limit_ms / p99, errors_broke=errors)


def simulate(
    stack: SimulatedStack, limit_ms: float, settings: SearchSettings, seed: int
) -> tuple[Estimate, int]:
    """One search on ``stack``: its estimate and the trials it took."""
    rng = random.Random(seed)
    search = CapacitySearch(settings)
    while (rate := search.next_rate()) is not None:
        search.tell(stack.trial(rate, limit_ms, rng))
    return search.estimate(), len(search.outcomes)
