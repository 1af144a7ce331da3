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

from servelab.analysis.stats import t_quantile

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


def blocks(design: Mapping[str, Cells]) -> dict[tuple[str, int], int]:
    """Each start's block: starts measured in shared passes (directly or through other
    starts) form one. Side by side every round is a block; in turns the rounds that were
    alive together are one."""
    parent: dict[tuple[str, int], tuple[str, int]] = {}

    def root(key: tuple[str, int]) -> tuple[str, int]:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    first_in_pass: dict[int, tuple[str, int]] = {}
    for name, cells in design.items():
        for start, passes in cells.items():
            key = (name, start)
            parent.setdefault(key, key)
            for number in passes:
                other = first_in_pass.setdefault(number, key)
                parent[root(key)] = root(other)
    roots = {key: root(key) for key in parent}
    numbering = {r: i for i, r in enumerate(dict.fromkeys(roots.values()))}
    return {key: numbering[r] for key, r in roots.items()}


@dataclass(frozen=True)
class _Fit:
    """Start means fitted as variant + block effects (least squares)."""

    variants: tuple[str, ...]
    coefficients: tuple[float, ...]  # one per variant, then one per block after the first
    covariance_unscaled: tuple[tuple[float, ...], ...]  # (X'X)^-1
    residual_variance: float
    df: int
    starts: dict[str, int]


def _fit(design: Mapping[str, Cells]) -> _Fit | None:
    """Pass-centred start means ~ variant + block. Centring on the pass removes the
    machine's moment, and makes the starts of one block sum to ~0, a correlation the
    block term takes out (without it, side by side with two variants, the interval
    came out half as wide as it should: A/A differences were called 3x too often)."""
    import numpy as np

    centres = pass_means(design)
    which = blocks(design)
    names = tuple(n for n, cells in design.items() if cells)
    rows, values = [], []
    block_ids = sorted(set(which.values()))
    for v, name in enumerate(names):
        for start, mean in start_means(design[name], centres).items():
            row = [0.0] * (len(names) + len(block_ids) - 1)
            row[v] = 1.0
            b = block_ids.index(which[(name, start)])
            if b:
                row[len(names) + b - 1] = 1.0
            rows.append(row)
            values.append(mean)
    x, y = np.array(rows), np.array(values)
    if not len(y):
        return None
    rank = int(np.linalg.matrix_rank(x))
    df = len(y) - rank
    if df <= 0 or rank < x.shape[1]:
        return None
    coefficients, *_ = np.linalg.lstsq(x, y, rcond=None)
    residuals = y - x @ coefficients
    unscaled = np.linalg.inv(x.T @ x)
    return _Fit(
        names,
        tuple(float(c) for c in coefficients),
        tuple(tuple(float(c) for c in row) for row in unscaled),
        float(residuals @ residuals) / df,
        df,
        {name: len(design[name]) for name in names},
    )


def _within_starts(design: Mapping[str, Cells]) -> float | None:
    """The slices' variance around start + pass (least squares, the passes absorbed by
    centring each slice and start column on its pass); None without a residual df. A
    block of k starts in P passes leaves (k - 1)(P - 1) df, not k(P - 1)."""
    import numpy as np

    rows = [
        ((name, start), number, value)
        for name, cells in design.items()
        for start, passes in cells.items()
        for number, value in passes.items()
    ]
    column = {key: i for i, key in enumerate(dict.fromkeys(key for key, _, _ in rows))}
    x = np.zeros((len(rows), len(column)))
    y = np.array([value for _, _, value in rows], dtype=float)
    in_pass: dict[int, list[int]] = {}
    for row, (key, number, _) in enumerate(rows):
        x[row, column[key]] = 1.0
        in_pass.setdefault(number, []).append(row)
    for members in in_pass.values():
        x[members] -= x[members].mean(axis=0)
        y[members] -= y[members].mean()
    df = len(rows) - len(in_pass) - (int(np.linalg.matrix_rank(x)) if rows else 0)
    if df <= 0:
        return None
    residuals = y - x @ np.linalg.lstsq(x, y, rcond=None)[0]
    return float(residuals @ residuals) / df


def variance_components(design: Mapping[str, Cells]) -> VarianceComponents | None:
    """Between-start and within-start variance (ANOVA estimates), or None without
    the degrees of freedom for either."""
    fit = _fit(design)
    within = None if fit is None else _within_starts(design)
    if fit is None or within is None:
        return None
    mean_passes = statistics.fmean(len(s) for cells in design.values() for s in cells.values())
    between = max(0.0, fit.residual_variance - within / mean_passes)
    return VarianceComponents(between, within, mean_passes)


def compare_design(
    design: Mapping[str, Cells],
    baseline: str,
    variant: str,
    *,
    log_scale: bool,
    level: float = 0.95,
) -> DesignEffect | None:
    """``variant`` against ``baseline``: the difference of their starts' levels (variant
    and block effects fitted to the pass-centred start means of every variant) with a t
    interval on the residual degrees of freedom.

    ``design`` maps every variant of one workload to its slices (already in the
    analysed scale: see :func:`transform`). None when there is nothing to test
    (either side without a start, or no degree of freedom left for the spread).
    """
    from scipy import special  # Student's t CDF (stdtr): stats.t.sf's answer, 30x sooner

    if not design.get(baseline) or not design.get(variant):
        return None
    fit = _fit(design)
    if fit is None:
        return None
    i, j = fit.variants.index(variant), fit.variants.index(baseline)
    estimate = fit.coefficients[i] - fit.coefficients[j]
    c = fit.covariance_unscaled
    se = math.sqrt(max(0.0, fit.residual_variance * (c[i][i] + c[j][j] - 2 * c[i][j])))
    t = t_quantile(0.5 + level / 2, fit.df)
    p_value = None if estimate == 0 else 0.0  # no spread at all: no test
    if se > 0:
        p_value = float(2 * special.stdtr(fit.df, -abs(estimate) / se))
    measured = {n for name in (baseline, variant) for s in design[name].values() for n in s}
    return DesignEffect(
        estimate,
        estimate - t * se,
        estimate + t * se,
        p_value,
        fit.df,
        (fit.starts[baseline], fit.starts[variant]),
        len(measured),
        log_scale,
    )


def starts_needed(half_width: float, starts: int, target_half_width: float) -> int | None:
    """Starts per variant for an interval ``half_width`` wide (either side) over ``starts``
    starts to shrink to ``target_half_width`` (same scale), assuming the pooled spread
    stays what it is; None when unknown."""
    if not half_width > 0 or not target_half_width > 0:
        return None
    return max(starts, math.ceil(starts * (half_width / target_half_width) ** 2))
