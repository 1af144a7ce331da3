"""Statistics of an interleaved design: stack starts (restarts) measured in shared passes.

Pure functions, no I/O.

The design: every variant is started several times (the *starts*); all starts of
a round are alive at once and a *pass* drives each of them for one short slice,
one after the other, so slices of the same pass are measured at most a few
seconds apart. Two things vary on a noisy machine:

- the machine's speed over time: the same for every slice of a pass, so it is
  removed by subtracting each pass's mean (over all starts that it measured);
- the stack start itself (how connections spread over workers, hash seeds,
  memory layout): the same for every slice of one start, so the start is the
  unit that varies between measurements of one variant.

The model, on log scale for rates and latencies (a ratio is what users ask for
and the noise is multiplicative): ``y = mu + variant + pass + start + e``. The
comparison of a variant with the baseline is a t interval on the starts' means
(each start's pass-centred slices averaged), with the between-start variance
pooled over every variant of the workload (the one-way ANOVA error term, as in
Dunnett's comparisons with a control). This is the exact analysis of a
balanced nested (split-plot) design and stays honest with few starts, where a
bootstrap over three starts or a mixed model's normal-theory interval would be
too narrow. The A/A figures behind this choice are in the README.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

# One variant's slices: start -> pass -> value.
Cells = Mapping[int, Mapping[int, float]]


@dataclass(frozen=True)
class VarianceComponents:
    """Where the noise is, in the scale the design was analysed in (log for rates)."""

    between_starts: float  # variance of a start's true level (sigma_u squared)
    within_start: float  # variance of one slice around its start's level (sigma_e squared)
    passes: float  # mean passes per start

    @property
    def starts_dominate(self) -> bool:
        """True when a start's mean is noisier because of the start than of its slices:
        more restarts then buy more precision than more passes."""
        return self.between_starts >= self.within_start / max(self.passes, 1.0)


@dataclass(frozen=True)
class DesignEffect:
    """A variant against the baseline in a nested design: the effect with its interval."""

    estimate: float  # variant - baseline, in the analysed scale
    low: float
    high: float
    p_value: float | None
    df: int
    starts: tuple[int, int]  # (baseline starts, variant starts)
    passes: int  # distinct passes that measured either side
    log_scale: bool

    def as_percent(self, baseline_level: float) -> tuple[float, float, float] | None:
        """(change, low, high) in percent of the baseline; None on a zero baseline."""
        values = (self.estimate, self.low, self.high)
        if self.log_scale:
            change, low, high = (100 * math.expm1(x) for x in values)
        elif baseline_level == 0:
            return None
        else:
            change, low, high = (100 * x / baseline_level for x in values)
        return change, low, high


def transform(value: float, log_scale: bool) -> float:
    if not log_scale:
        return value
    return math.log(value) if value > 0 else math.nan


def pass_means(design: Mapping[str, Cells]) -> dict[int, float]:
    """Each pass's mean over every start it measured (all variants)."""
    seen: dict[int, list[float]] = {}
    for cells in design.values():
        for passes in cells.values():
            for pass_number, value in passes.items():
                seen.setdefault(pass_number, []).append(value)
    return {p: statistics.fmean(values) for p, values in seen.items()}


def start_means(cells: Cells, centres: Mapping[int, float]) -> dict[int, float]:
    """Each start's mean of its pass-centred slices."""
    return {
        start: statistics.fmean(value - centres[p] for p, value in passes.items())
        for start, passes in cells.items()
        if passes
    }


def _pooled(groups: list[list[float]]) -> tuple[float, int]:
    """Pooled within-group variance and its degrees of freedom."""
    squares, df = 0.0, 0
    for values in groups:
        if len(values) > 1:
            mean = statistics.fmean(values)
            squares += sum((v - mean) ** 2 for v in values)
            df += len(values) - 1
    return (squares / df if df else math.nan), df


def variance_components(design: Mapping[str, Cells]) -> VarianceComponents | None:
    """Between-start and within-start variance (ANOVA estimates), or None without
    two starts of a variant or two passes of a start."""
    centres = pass_means(design)
    means_by_variant, residuals, passes = [], [], []
    for cells in design.values():
        means = start_means(cells, centres)
        means_by_variant.append(list(means.values()))
        for start, slices in cells.items():
            residuals.append([v - centres[p] - means[start] for p, v in slices.items()])
            passes.append(len(slices))
    between, df_between = _pooled(means_by_variant)
    squares = sum(r * r for group in residuals for r in group)
    # Each start loses one df to its mean; the pass centring costs a few more, ignored.
    df_within = sum(len(g) - 1 for g in residuals)
    if not df_between or not df_within:
        return None
    within = squares / df_within
    mean_passes = statistics.fmean(passes)
    return VarianceComponents(max(0.0, between - within / mean_passes), within, mean_passes)


def compare_design(
    design: Mapping[str, Cells],
    baseline: str,
    variant: str,
    *,
    log_scale: bool,
    level: float = 0.95,
) -> DesignEffect | None:
    """``variant`` against ``baseline``: the difference of their starts' mean levels with
    a t interval whose variance is pooled over every variant's starts.

    ``design`` maps every variant of one workload to its slices (already in the
    analysed scale: see :func:`transform`). None when there is nothing to test
    (either side without a start, or no start repeated anywhere).
    """
    from scipy import stats as sps

    centres = pass_means(design)
    means = {name: start_means(cells, centres) for name, cells in design.items()}
    b, v = means.get(baseline, {}), means.get(variant, {})
    if not b or not v:
        return None
    variance, df = _pooled([list(m.values()) for m in means.values()])
    if not df:
        return None
    estimate = statistics.fmean(v.values()) - statistics.fmean(b.values())
    se = math.sqrt(variance * (1 / len(b) + 1 / len(v)))
    t = float(sps.t.ppf(0.5 + level / 2, df))
    p_value = None if estimate == 0 else 0.0  # no spread at all: no test
    if se > 0:
        p_value = float(2 * sps.t.sf(abs(estimate) / se, df))
    measured = {n for name in (baseline, variant) for s in design[name].values() for n in s}
    return DesignEffect(
        estimate,
        estimate - t * se,
        estimate + t * se,
        p_value,
        df,
        (len(b), len(v)),
        len(measured),
        log_scale,
    )


def starts_needed(effect: DesignEffect, target_half_width: float) -> int | None:
    """Starts per variant for the interval's half-width to shrink to ``target_half_width``
    (same scale), assuming the pooled spread stays what it is; None when unknown."""
    half = (effect.high - effect.low) / 2
    if not half > 0 or not target_half_width > 0:
        return None
    starts = max(effect.starts)
    return max(starts, math.ceil(starts * (half / target_half_width) ** 2))
