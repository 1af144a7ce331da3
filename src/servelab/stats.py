"""Pure statistics over measured values. No I/O, no state."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    stdev: float  # sample standard deviation; 0 for a single value
    minimum: float
    maximum: float

    @property
    def cv(self) -> float:
        """Coefficient of variation (stdev / mean); NaN when the mean is 0."""
        return self.stdev / self.mean if self.mean else math.nan


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("cannot summarize no values")
    stdev = statistics.stdev(values) if len(values) > 1 else 0.0
    return Summary(len(values), statistics.fmean(values), stdev, min(values), max(values))


def percent_change(baseline: float, value: float) -> float | None:
    """(value - baseline) / baseline in percent; None when the baseline is 0."""
    if baseline == 0:
        return None
    return 100.0 * (value - baseline) / baseline
