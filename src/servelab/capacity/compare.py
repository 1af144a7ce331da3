"""Each variant's capacity against the baseline's: a ratio with an interval and a verdict,
Holm-adjusted over the variants (analysis.family.holm). Pure.

Each capacity comes with Fieller's interval, asymmetric around it; on the log scale it is
near symmetric, so each is read as a normal estimate of log capacity whose standard error
is the interval's log width over twice the normal quantile of its confidence, and the log
ratio's standard error is that of a difference of two independent estimates (the variants'
trials are measured on separate stacks, in turns). This is an approximation (the delta
method's): it is as good as the intervals are symmetric in log.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from servelab.analysis.family import holm
from servelab.capacity.plan import VariantCapacity

ALPHA = 0.05


@dataclass(frozen=True)
class CapacityComparison:
    variant: str
    ratio: float | None  # the variant's capacity over the baseline's
    interval: tuple[float, float] | None  # of the ratio, at the search's confidence
    p_value: float | None
    adjusted_p: float | None  # Holm over the study's variants
    verdict: str  # "more", "less", "no difference shown", "no answer"

    def describe(self, baseline: str) -> str:
        if self.ratio is None or self.interval is None:
            return f"{self.variant}: no capacity ratio (a search gave no interval)"
        low, high = self.interval
        sign = lambda x: f"{100 * (x - 1):+.0f}"  # noqa: E731
        return (
            f"{self.variant}: {sign(self.ratio)} % [{sign(low)}, {sign(high)}] capacity vs "
            f"{baseline} ({self.verdict}; Holm-adjusted p = {self.adjusted_p:.2g})"
        )


def log_se(answer: VariantCapacity, confidence: float) -> float | None:
    """The standard error of log capacity that its interval implies (None: no interval)."""
    from scipy import stats

    e = answer.estimate
    if e.interval is None or e.rate is None or e.interval[0] <= 0:
        return None
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    return (math.log(e.interval[1]) - math.log(e.interval[0])) / (2 * z)


def compare_capacities(
    answers: Sequence[VariantCapacity], confidence: float, alpha: float = ALPHA
) -> list[CapacityComparison]:
    """Every variant after the first (the baseline) against it."""
    from scipy import stats

    baseline, variants = answers[0], answers[1:]
    base_se = log_se(baseline, confidence)
    z_interval = float(stats.norm.ppf(0.5 + confidence / 2))
    rows: list[tuple[str, float | None, tuple[float, float] | None, float | None]] = []
    for answer in variants:
        se = log_se(answer, confidence)
        if se is None or base_se is None or not answer.estimate.rate or not baseline.estimate.rate:
            rows.append((answer.variant, None, None, None))
            continue
        log_ratio = math.log(answer.estimate.rate / baseline.estimate.rate)
        both = math.hypot(se, base_se)
        rows.append((
            answer.variant, math.exp(log_ratio),
            (math.exp(log_ratio - z_interval * both), math.exp(log_ratio + z_interval * both)),
            2 * float(stats.norm.sf(abs(log_ratio) / both)) if both > 0 else 0.0,
        ))
    tested = [i for i, row in enumerate(rows) if row[3] is not None]
    adjusted = dict(zip(tested, holm([rows[i][3] or 0.0 for i in tested]), strict=True))
    out = []
    for i, (variant, ratio, interval, p) in enumerate(rows):
        if ratio is None or interval is None or p is None:
            out.append(CapacityComparison(variant, None, None, None, None, "no answer"))
            continue
        p_adjusted = adjusted[i]
        verdict = (
            ("more" if ratio > 1 else "less") if p_adjusted < alpha else "no difference shown"
        )
        out.append(CapacityComparison(variant, ratio, interval, p, p_adjusted, verdict))
    return out
