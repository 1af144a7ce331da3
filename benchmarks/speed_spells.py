"""The machine's speed in spells: what a capacity search's intervals hold when the
machine's speed does not change from trial to trial independently but in spells of
minutes, as this VM's does (docs/capacity-estimand.md, "Where it is known to be off").

Simulated searches (capacity's own QuantileSearch, 24 trials at most) of queues whose
speed's log is an AR(1) over the trials (capacity.simulated.SlowSpells: correlated
--memory from one trial to the next, the queue's drift as its spread, so the long-run
holding curve is the queue's own). Each search's 90 % intervals of the rate held in 9
trials of 10 and in half of them, against two truths: the long-run curve (every speed
the machine takes), and the curve of the speeds that search's trials met. Prints figures;
asserts nothing.

    .venv/bin/python benchmarks/speed_spells.py [--searches 200]

About 1 minute per 100 searches a case on one CPU.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics

from servelab.capacity.curve import HoldingCurve
from servelab.capacity.quantile import QuantileSearch
from servelab.capacity.search import Outcome, SearchSettings
from servelab.capacity.simulated import SimulatedStack, SlowSpells, run_search

SETTINGS = SearchSettings(start_rate=450, max_rate=1800, factor=1.5, max_trials=24)
LIMIT_MS = 100.0
SHARP = SimulatedStack(scale_ms_per_s=4000, noise=0.05, drift=0.03)  # the sleepy stack's
CPU_BOUND = SimulatedStack(scale_ms_per_s=4000, noise=0.10, drift=0.08)  # FastAPI's
CASES = {  # name: (queue, memory; 0: independent trials)
    "sharp knee, 3 %, independent": (SHARP, 0.0),
    "sharp knee, 3 %, spells 0.9": (SHARP, 0.9),
    "CPU-bound, 8 %, independent": (CPU_BOUND, 0.0),
    "CPU-bound, 8 %, spells 0.8": (CPU_BOUND, 0.8),
    "CPU-bound, 8 %, spells 0.95": (CPU_BOUND, 0.95),
}


def rate_held(stack: SimulatedStack, speeds: list[float], share: float) -> float:
    """The rate held in ``share`` of trials made at ``speeds`` (bisection in log)."""
    low, high = 1e-3, 10 * stack.saturation
    for _ in range(100):
        mid = math.sqrt(low * high)
        p = statistics.fmean(stack.probability_at(mid, LIMIT_MS, s) for s in speeds)
        low, high = (mid, high) if p > share else (low, mid)
    return math.sqrt(low * high)


def one_search(stack: SimulatedStack, memory: float, seed: int) -> tuple[
    HoldingCurve | None, list[float]
]:
    """A search, and the speeds its trials met."""
    rng = random.Random(seed)
    spells = SlowSpells(stack, memory, rng)
    speeds: list[float] = []

    def trial(rate: float, _: int) -> Outcome:
        if memory:
            outcome = spells.trial(rate, LIMIT_MS)
            speeds.append(math.exp(spells.log_speed or 0.0))
            return outcome
        speed = math.exp(rng.gauss(0, stack.drift))
        speeds.append(speed)
        return stack.trial(rate, LIMIT_MS, rng, speed)

    search = QuantileSearch(SETTINGS)
    run_search(search, trial)
    return search.curve(), speeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=200)
    args = parser.parse_args()
    n = args.searches
    print(f"{n} searches a case; 90 % intervals; coverage of the rate held in 9 of 10 "
          "trials (r_0.9) and in half (r_0.5)")
    print(f"{'case':32s} {'long-run r_0.9':>15s} {'r_0.5':>6s}   "
          f"{'its own speeds r_0.9':>21s} {'r_0.5':>6s}   half-width r_0.9")
    for name, (stack, memory) in CASES.items():
        long_run = (stack.quantile(0.9, LIMIT_MS), stack.quantile(0.5, LIMIT_MS))
        held = {"long": [0, 0], "own": [0, 0]}
        widths = []
        for seed in range(n):
            curve, speeds = one_search(stack, memory, seed)
            own = (rate_held(stack, speeds, 0.9), rate_held(stack, speeds, 0.5))
            for k in (0, 1):
                point = None if curve is None else (curve.hold, curve.half)[k]
                if point is None or point.interval is None:
                    continue
                low, high = point.interval
                held["long"][k] += low <= long_run[k] <= high
                held["own"][k] += low <= own[k] <= high
                if k == 0 and point.relative_half_width:
                    widths.append(point.relative_half_width)
        print(f"{name:32s} {held['long'][0] / n:15.2f} {held['long'][1] / n:6.2f}   "
              f"{held['own'][0] / n:21.2f} {held['own'][1] / n:6.2f}   "
              f"±{100 * statistics.median(widths):.1f} %", flush=True)


if __name__ == "__main__":
    main()
