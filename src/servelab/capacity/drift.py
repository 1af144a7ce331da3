"""What moved while a capacity was measured: the machine's own speed before each start
and the stack's CPU per request, over a variant's trials. Pure.

A CPU-bound stack's capacity is its CPU's saturation less a little, so it moves with the
machine's speed and with the CPU a request costs (docs/validation/capacity.md: 8 % between 5 s
trials, 11 % between hours on the seed's FastAPI stack). These figures say how much they
moved during this search, beside the answer, rather than leaving it to be guessed.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from servelab.capacity.trials import Trial

MIN_TRIALS = 3  # fewer: no spread worth stating


@dataclass(frozen=True)
class Spread:
    """A figure over the trials: its lowest and highest, the coefficient of variation,
    and the change from the first third of the trials to the last (a drift, not noise)."""

    low: float
    high: float
    cv: float
    first_to_last: float  # mean of the last third over the first's, minus 1

    def words(self, unit: str, digits: int = 0) -> str:
        return (
            f"{self.low:,.{digits}f}-{self.high:,.{digits}f} {unit} (CV {100 * self.cv:.1f} %, "
            f"{100 * self.first_to_last:+.1f} % from the first third of the trials to the last)"
        )


def spread(values: Sequence[float]) -> Spread | None:
    """``values`` in trial order as a Spread; None for fewer than MIN_TRIALS."""
    if len(values) < MIN_TRIALS:
        return None
    mean = statistics.fmean(values)
    third = max(1, len(values) // 3)
    first, last = statistics.fmean(values[:third]), statistics.fmean(values[-third:])
    return Spread(
        min(values), max(values), statistics.stdev(values) / mean if mean else 0.0,
        last / first - 1 if first else 0.0,
    )


@dataclass(frozen=True)
class Drift:
    machine_speed: Spread | None  # the fixed CPU loop before each start (units/s)
    cpu_ms_per_request: Spread | None  # the stack's CPU per answered request

    def lines(self, variant: str) -> list[str]:
        said = []
        if self.machine_speed is not None:
            said.append(f"{variant}: the machine's own speed {self.machine_speed.words('units/s')}")
        if self.cpu_ms_per_request is not None:
            said.append(
                f"{variant}: the stack's CPU per request "
                f"{self.cpu_ms_per_request.words('ms', 3)} (it also falls as the rate rises)"
            )
        return said


def drift(trials: Sequence[Trial]) -> Drift:
    """The drift over ``trials`` (trusted ones, in the order they ran)."""
    kept = [t for t in trials if t.trusted]
    speeds = [t.cpu_speed for t in kept if t.cpu_speed is not None]
    costs = [c for t in kept if (c := t.stack_cpu_ms_per_request) is not None]
    return Drift(spread(speeds), spread(costs))
