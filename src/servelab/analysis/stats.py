"""Pure statistics over measured values. No I/O, no state."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace


@functools.lru_cache(maxsize=4096)
def t_quantile(q: float, df: float) -> float:
    """Student's t quantile (scipy), remembered: the stopping rule asks the same few
    (level, degrees of freedom) after every round, and scipy's ``ppf`` costs about 0.3 ms
    a call (most of a simulated study's analysis: tests/unit/measuring/test_error_rates)."""
    from scipy import stats as sps

    return float(sps.t.ppf(q, df))


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    stdev: float  # sample standard deviation; 0 for a single value
    minimum: float
    maximum: float
    median: float

    @property
    def cv(self) -> float:
        """Coefficient of variation (stdev / mean); NaN when the mean is 0."""
        return self.stdev / self.mean if self.mean else math.nan


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("cannot summarize no values")
    mean = statistics.fmean(values)
    # In floats (math.fsum), not statistics.stdev's exact fractions: the same to print
    # precision, and a fifth of a simulated study's analysis otherwise.
    n = len(values)
    stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return Summary(
        n,
        mean,
        stdev,
        min(values),
        max(values),
        statistics.median(values),
    )


def percent_change(baseline: float, value: float) -> float | None:
    """(value - baseline) / baseline in percent; None when the baseline is 0."""
    if baseline == 0:
        return None
    return 100.0 * (value - baseline) / baseline


def confidence_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """Two-sided t interval for the mean; None for fewer than two values."""
    if len(values) < 2:
        return None
    s = summarize(values)
    half = t_quantile(0.5 + level / 2, s.n - 1) * s.stdev / math.sqrt(s.n)
    return (s.mean - half, s.mean + half)


def runs_needed(values: Sequence[float], precision_pct: float, level: float = 0.95) -> int | None:
    """Runs for the mean's interval to be within ±``precision_pct`` % (pyperf's rule of thumb).

    None when it cannot be estimated (fewer than two values or a zero mean).
    """
    if len(values) < 2:
        return None
    s = summarize(values)
    if s.mean == 0 or precision_pct <= 0:
        return None
    t = t_quantile(0.5 + level / 2, s.n - 1)
    return max(2, math.ceil((t * 100 * s.stdev / abs(s.mean) / precision_pct) ** 2))


# A comparison is clear on its precision only with at least this many degrees of
# freedom behind its interval. Simulated quick studies (3 % start spread, 5 % slice
# spread; the real Runner, tests/unit/measuring/test_error_rates.py,
# benchmarks/error_rates.py): stopping on precision from 2 df covered the truth 91-92 %
# of the time (a lucky small spread at an early look), from 4 df 92-93 %, from 6 df
# 94-95 %, the same as never stopping early.
MIN_CLEAR_DF = 6
# Haybittle-Peto: before the budget ends, a comparison is clear early (and a check's
# threshold decided) only when its 99.9 % interval lies beyond the minimum effect (the
# threshold): an error rate of 0.1 % per look, which leaves the final 5 % test
# practically untouched. Its t quantile already pays for few degrees of freedom (12.9
# on 3 df), so this rule needs no floor of its own: a check of a ten-times slowdown in
# turns is decided after 4 rounds instead of the 7 that 6 df took.
EARLY_LEVEL = 0.999
# Verdicts that say a difference was found; "not judged" is a figure shown without one
# (a metric the design cannot vouch for, analysis.validity).
DIFFERENT = ("better", "worse")
NOT_JUDGED = "not judged"


@dataclass(frozen=True)
class Comparison:
    """A variant against the baseline on one metric, with a verdict that can say 'don't know'."""

    baseline_mean: float
    variant_mean: float
    difference: float  # variant - baseline
    difference_pct: float | None
    interval: tuple[float, float] | None  # 95 % interval of the difference (Welch or paired)
    p_value: float | None
    verdict: str  # "better", "worse", "no significant difference", "no difference", "inconclusive"
    reason: str
    # The test behind the interval and p-value, as reports name it.
    test: str = "Welch's t-test"
    starts: tuple[int, int] | None = None  # (baseline, variant) stack starts compared
    passes: int | None = None  # passes of slices behind them (interleaved designs)
    df: float | None = None  # degrees of freedom behind the interval
    # The p-value adjusted for the family of comparisons it was judged in (Holm), and
    # that family's size; None until analysis.family judged it.
    p_adjusted: float | None = None
    family: int | None = None

    @property
    def interval_pct(self) -> tuple[float, float] | None:
        """The interval as percent of the baseline mean (None without one, or a 0 baseline)."""
        if self.interval is None or not self.baseline_mean:
            return None
        return (
            100 * self.interval[0] / self.baseline_mean,
            100 * self.interval[1] / self.baseline_mean,
        )

    def widened(self, level: float) -> Comparison:
        """The same comparison with its interval at ``level`` instead of 95 % (the same
        centre and degrees of freedom); itself without an interval or df."""
        if self.interval is None or self.df is None:
            return self
        low, high = self.interval
        centre, half = (high + low) / 2, (high - low) / 2
        half *= t_quantile(0.5 + level / 2, self.df) / t_quantile(0.975, self.df)
        return replace(self, interval=(centre - half, centre + half))

    def is_clear(self, precision_pct: float, min_effect_pct: float = 0.0) -> bool:
        """Clear: the 95 % interval is at most ±precision wide (on at least MIN_CLEAR_DF
        degrees of freedom), or its 99.9 % widening lies entirely beyond ±min-effect.

        Measuring stops on precision, not on significance: a rule that stops as soon as
        an interval clears zero calls identical stacks different 7-9 % of the time at a
        nominal 5 %, and its intervals cover the truth 91 % of the time
        (docs/validation/aa-planted.md)."""
        if self.verdict == "no difference":
            return True
        bounds = self.interval_pct
        if bounds is None or self.df is None:
            return False
        low, high = bounds
        if self.df >= MIN_CLEAR_DF and (high - low) / 2 <= precision_pct:
            return True
        early = self.widened(EARLY_LEVEL).interval_pct
        assert early is not None
        return early[0] > min_effect_pct or early[1] < -min_effect_pct


def compare(
    baseline: Sequence[float],
    variant: Sequence[float],
    *,
    higher_is_better: bool = True,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
) -> Comparison:
    """Welch's t-test of ``variant`` against ``baseline``.

    The verdict is "better"/"worse" only when the test could be computed, its
    p-value is below ``alpha`` and the difference is at least
    ``min_effect_pct`` percent of the baseline; a test that cannot be
    computed (too few runs, no variance) is "inconclusive", never significant.
    """
    b, v = summarize(baseline), summarize(variant)
    difference = v.mean - b.mean
    pct = percent_change(b.mean, v.mean)

    def result(
        interval: tuple[float, float] | None, p: float | None, verdict: str, reason: str
    ) -> Comparison:
        return Comparison(b.mean, v.mean, difference, pct, interval, p, verdict, reason)

    if b.n < 2 or v.n < 2:
        return result(None, None, "inconclusive", "needs at least 2 runs on each side")
    if b.stdev == 0 and v.stdev == 0:
        if b.mean == v.mean:
            return result((0.0, 0.0), None, "no difference", "identical in every run")
        return result(None, None, "inconclusive", "no variation in either side: no test possible")
    from scipy import stats as sps

    test = sps.ttest_ind(variant, baseline, equal_var=False)
    p = float(test.pvalue)
    if math.isnan(p):
        return result(None, None, "inconclusive", "the t-test could not be computed")
    b_var, v_var = b.stdev**2 / b.n, v.stdev**2 / v.n
    se = math.sqrt(b_var + v_var)
    dof = (b_var + v_var) ** 2 / (
        (b_var**2 / (b.n - 1) if b_var else 0.0) + (v_var**2 / (v.n - 1) if v_var else 0.0)
    )
    half = t_quantile(1 - alpha / 2, dof) * se
    interval = (difference - half, difference + half)
    found = _verdict(result, interval, p, pct, difference, higher_is_better, alpha, min_effect_pct)
    return replace(found, df=dof)


def compare_paired(
    baseline: Sequence[float],
    variant: Sequence[float],
    *,
    higher_is_better: bool = True,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
) -> Comparison:
    """Paired t-test: ``baseline[i]`` and ``variant[i]`` were measured in the same round.

    servelab runs every variant once per round (interleaved), so a machine that
    drifts between rounds moves both values of a pair alike; testing the
    per-round differences takes that drift out, which Welch's test on the two
    samples cannot. Same verdicts and "inconclusive" rules as :func:`compare`.
    """
    if len(baseline) != len(variant):
        raise ValueError("paired values need one baseline value per variant value")
    b, v = summarize(baseline), summarize(variant)
    d = summarize([y - x for x, y in zip(baseline, variant, strict=True)])
    difference = v.mean - b.mean
    pct = percent_change(b.mean, v.mean)

    def result(
        interval: tuple[float, float] | None, p: float | None, verdict: str, reason: str
    ) -> Comparison:
        return Comparison(b.mean, v.mean, difference, pct, interval, p, verdict, reason)

    if d.n < 2:
        return result(None, None, "inconclusive", "needs at least 2 rounds with both measured")
    if d.stdev == 0:
        if d.mean == 0:
            return result((0.0, 0.0), None, "no difference", "identical in every round")
        return result(
            None, None, "inconclusive", "the same difference in every round: no test possible"
        )
    from scipy import stats as sps

    p = float(sps.ttest_rel(variant, baseline).pvalue)
    if math.isnan(p):
        return result(None, None, "inconclusive", "the t-test could not be computed")
    half = t_quantile(1 - alpha / 2, d.n - 1) * d.stdev / math.sqrt(d.n)
    interval = (d.mean - half, d.mean + half)
    found = _verdict(result, interval, p, pct, difference, higher_is_better, alpha, min_effect_pct)
    return replace(found, df=d.n - 1)


# Below this a p-value is printed as "< 0.0001": the t model's far tail is not exact
# enough for a figure like 4.9e-108 to mean more than "very small".
SMALLEST_P = 1e-4


def p_text(p: float, digits: int = 2) -> str:
    """What follows "p" in words: "= 0.056", or "< 0.0001" below SMALLEST_P."""
    return f"< {SMALLEST_P:g}" if p < SMALLEST_P else f"= {p:.{digits}g}"


def verdict(
    p: float, pct: float | None, difference: float, *, higher_is_better: bool, alpha: float,
    min_effect_pct: float,
) -> tuple[str, str]:
    """better / worse / no significant difference from a computed test, and why."""
    if p >= alpha:
        return "no significant difference", f"p {p_text(p, 3)} >= {alpha}"
    if pct is not None and abs(pct) < min_effect_pct:
        return (
            "no significant difference",
            f"p {p_text(p, 3)}, but |{pct:.2f} %| is below the minimum effect of "
            f"{min_effect_pct} %",
        )
    improved = (difference > 0) == higher_is_better
    return ("better" if improved else "worse"), f"p {p_text(p, 3)} < {alpha}"


# A comparison's constructor with the means filled in: (interval, p, verdict, reason).
_Result = Callable[[tuple[float, float] | None, float | None, str, str], Comparison]


def _verdict(
    result: _Result,
    interval: tuple[float, float],
    p: float,
    pct: float | None,
    difference: float,
    higher_is_better: bool,
    alpha: float,
    min_effect_pct: float,
) -> Comparison:
    said, why = verdict(
        p, pct, difference, higher_is_better=higher_is_better, alpha=alpha,
        min_effect_pct=min_effect_pct,
    )
    return result(interval, p, said, why)
