"""The holding curve: P(hold | rate), the chance that a trial at a rate holds the SLO,
fitted to a search's trials, and the search that places trials to learn two of its
points. Pure (no I/O): ``fit_curve`` reads outcomes, ``QuantileSearch`` proposes rates
and is told outcomes (search.Search), so simulated trials test both.

The capacity is a point on that curve: the planning figure is the rate held in ``hold``
of trials (9 in 10 by default), given with the rate held in half of them, each with an
interval. A sharp edge (the two within ``precision`` of each other: ``steep``) reads as
one number; a wide band (the CPU-bound FastAPI stack here held and broke over 30 % of
rates, docs/capacity.md) as both, and the band between them.

The model. A trial's margin m is the log of the SLO's limit over what it measured (> 0
held). m = a - b ln(rate) + N(0, s^2), so P(hold | rate) = Phi((a - b ln rate) / s) and
the rate held in a share q of trials is exp((a - s z_q) / b), z_q = Phi^-1(q). Margins
past +-ln FIT_SPAN (2) are censored (Tobit: the fit reads only "held far" or "broke
far" there); a trial broken by errors is censored at m < 0 (its latency is of the
requests answered). Fitted by maximum likelihood in Olsen's parameters (alpha = a / s,
beta = b / s, h = 1 / s), in which the Tobit log-likelihood is concave: Newton's method
from any start, bounds held by fixing a parameter at its bound (no crash on trials that
all held far and broke far: a step somewhere in the gap). The point q is where
alpha - beta x = z_q, a constraint linear in them, so its profile likelihood (beta and
h maximised with alpha = z_q + beta x_q) is concave too; its interval is where twice
the drop stays under the cut, found on each side by regula falsi, None where it does
not fall through the cut within the rates searched (the slope not told from the noise).

Why so (simulated searches, 200 each, the figures below; the cases are capacity.
simulated's: a known curve, MarginCurve, still or drifting, and queues, SimulatedStack,
whose margins are not this model: the log margin bends near saturation, the machine's
speed drifts between trials):

- Margins, not held/broken alone: a trial that held with room to spare says more. But
  only near the SLO: with the search's MARGIN_SPAN (4) censoring, a line through a
  queue's concave log margins under-stated r_0.9 in every search of a soft knee
  (coverage 0.00) and in half of a sharp one with 3 % drift; censored at 2, a queue's
  far trials say only "far" and every trial can be fitted. Censored at 1.5 the
  margins of a known wide band are wasted (r_0.5 covered 0.75 against 0.87, 100
  searches); held/broken alone (1.0001; with an earlier, laxer stop) wide bands 0.3-0.4.
- Every trial fitted, none left out by a window: the old search's (25 % around the
  bracket) left a wide band without an interval in a fifth to a half of searches.
- The noise by REML (the measured margins' count less the line's 2 in log h's weight:
  ML's s is low by (n - 2) / n, the band then too narrow, r_0.9 over-stated), the cut
  in its small-sample form (n log(1 + t^2_{n-3} / (n - 3)), exact for a line's
  linear functions), widened where the trials' scores scatter more than the model says
  (the sandwich variance over the model's, at least 1: a queue's skewed margins). With
  neither, the steep edge's r_0.9 covered 0.85 and the wide band's 0.70; with both 0.92
  and 0.85 (censored at 1.5, 100 searches). The fit alone, 24 trials evenly spread over a
  known wide band, covers 0.89 and 0.91 (300 fits): what the search loses below is its
  design's and its stopping's.
- The search brackets as search.CapacitySearch (up by its factor, down while broken,
  then between the highest held and the lowest broken while they are more than 4 %
  apart: trials aimed at a fit of separated trials crept down the gap one at a time);
  then aims in turn 2 % below r_0.9, 2 % above r_0.5, 2 % above r_0.9, 2 % below r_0.5
  (on a steep curve, 2 % either side of the one point). Spreading trials by the band's
  uncertainty (2-8 %) lifted the wide band to 0.93 but the steep edge then took 23-24
  trials instead of 12 and the soft knee's r_0.9 fell to 0.70-0.78; one trial in three
  6 % out helped the CPU-bound queue (0.925) and cost the sharp knee 0.05.
- It stops when both points' intervals are within the half-width (a steep curve's
  one), with at least MIN_FITTED (10) trials, MIN_EACH (3) held and 3 broken within 10
  % of the band, and MIN_WIDE (16) for two numbers: stopping at 6 trials took three
  margins nearly on a line for precision (s 0.07 fitted, 0.5 true). 20 for two numbers
  gave the same coverage (within 0.025) for 4 more trials on the sharp knees; the stop
  read at 99 % gained nothing either. Early stops on a band still cover less (the wide
  band's 22: 8): a band within +-5 % in under 24 trials is mostly luck.
- ``steep`` is claimed at STEEP_CONFIDENCE (99 %), not at the intervals' 90 %, and on
  MIN_MEASURED (5) margins measured at least: at 90 % two wide bands in 100 (10-11
  trials whose margins fell in order by chance) read as one number; at 99 % one 30 %
  band in 200 still did, on one margin measured and eleven censored (held and broken
  fell apart at 1,038 and 1,060 req/s), and three of the CPU-bound queue's 11 % bands.
  Now none, and the steep edge still reads as one number in 192 of 200.

Coverage of the 90 % intervals, 200 searches per case, start 450 req/s, x1.5, at most
24 trials, +-5 % target (no interval counts as a miss; "over" = the truth below the
interval, the capacity over-stated; the half-width and trials are medians):

                                 r_0.9                    r_0.5
case                             cover  over  half-width  cover  over  half-width  trials  steep
steep edge (band 1 %, s 0.1)     0.945  0.035   0.9 %     0.93   0.03    0.6 %       12    0.96
wide band (20 %, s 0.5)          0.875  0.115  10.0 %     0.86   0.05    6.7 %       24    0
wider band (30 %, s 1.0)         0.845  0.14   17.2 %     0.74   0.065   9.9 %       24    0
drifting (10 %, -0.3 %/trial)    0.915  0.045   5.9 %     0.93   0.02    4.0 %       24    0
queue: soft knee                 0.825  0.02    2.6 %     0.945  0       1.9 %       16    0.015
queue: sharp knee, 3 % drift     0.875  0.04    3.6 %     0.895  0.015   2.4 %       16    0.015
queue: sharp knee, 8 % drift     0.88   0.09    7.4 %     0.835  0.035   4.6 %       24    0

(The drifting curve's truth is the curve averaged over the search's trials. The wider
band's r_0.5 had an interval in 180 of 200. The 8 % drift is the CPU-bound FastAPI
stack's shape: a CPU whose cost per request moves 8 % between trials. The old search
on the soft and sharp knees, for its one crossing: 0.93 and 0.82, +-3.8 and 4.2 %, 7
and 8 trials; docs/capacity.md.)
The nominal 90 % is held on a steep edge, a drifting curve and the sleepy-like sharp
knee; a wide band falls 2-6 points short (at 24 trials the curve's slope is learnt from
few trials bunched near two points, and r_0.9 leans high); on the queues the misses are
mostly on the safe side (the concave log margin: a capacity under-stated). Trials: a
steep edge ends at 10-16, a narrow band (the queues') at 16-21, a wide one at its
budget; 24 trials of 5 s, each on a fresh start, is about 4 minutes. A search's fits
take 0.1-0.2 s of CPU in all here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from servelab.capacity.search import Outcome
from servelab.capacity.tobit import (
    ALPHA_MAX,
    BETA_MAX,
    LADDER,
    _critical,
    _crossings,
    _Data,
    _data,
    _Fit,
    _full_fit,
    _profile,
    _robust_ratio,
)

HOLD = 0.9  # the planning share: the rate held in 9 trials of 10
HALF = 0.5
FIT_SPAN = 2.0  # log margins past +-log 2 are censored: the fit reads only "far" there
STEEP_CONFIDENCE = 0.99  # "steep" (one number for both shares) is claimed at 99 %,
MIN_MEASURED = 5  # with 5 margins measured (not censored) at least


@dataclass(frozen=True)
class SharePoint:
    """The rate held in ``share`` of trials, and its interval (None: the trials do not
    bound it within the rates searched, at the curve's confidence)."""

    share: float
    rate: float
    interval: tuple[float, float] | None

    @property
    def relative_half_width(self) -> float | None:
        if self.interval is None:
            return None
        return (self.interval[1] - self.interval[0]) / 2 / self.rate


@dataclass(frozen=True)
class HoldingCurve:
    """P(hold | rate) = Phi((a - b ln rate) / s): the chance that a trial at a rate holds
    the SLO, fitted to the trials' log margins, m = a - b ln rate + N(0, s^2) (censored
    past +-ln FIT_SPAN; a trial broken by errors: m < 0).

    ``hold``: the planning figure, the rate held in ``hold.share`` of trials; ``half``: the
    rate held in half of them; each with its profile-likelihood interval at
    ``confidence``. ``band``: the interval of their ratio half / hold (its upper end None:
    unbounded; ``band`` None: not even its lower end). ``steep``: at STEEP_CONFIDENCE the
    ratio is within ``precision``, read from MIN_MEASURED margins at least: one number
    (``hold``) stands for both."""

    a: float
    b: float
    s: float
    confidence: float
    hold: SharePoint
    half: SharePoint
    band: tuple[float, float | None] | None
    steep: bool
    fitted: int  # trials fitted
    rates: tuple[float, float]  # the lowest and highest rate fitted

    @property
    def ratio(self) -> float:
        """The band's width: the rate held half of the time over the planning rate."""
        return self.half.rate / self.hold.rate

    def probability(self, rate: float) -> float:
        """The chance that a trial at ``rate`` holds the SLO."""
        return float(special.ndtr((self.a - self.b * math.log(rate)) / self.s))

    def rate_at(self, share: float) -> float:
        """The rate held in ``share`` of trials (0 < share < 1)."""
        return math.exp((self.a - self.s * float(special.ndtri(share))) / self.b)

    def points(
        self, low: float | None = None, high: float | None = None, count: int = 41
    ) -> list[tuple[float, float]]:
        """(rate, P(hold)) at ``count`` rates evenly spaced in log from ``low`` to ``high``
        (by default from where 99 % of trials hold to where 1 % do, widened to the rates
        fitted): the curve, for drawing."""
        low = low or min(self.rate_at(0.99), self.rates[0])
        high = high or max(self.rate_at(0.01), self.rates[1])
        step = math.log(high / low) / max(1, count - 1)
        return [
            (rate, self.probability(rate))
            for rate in (low * math.exp(i * step) for i in range(count))
        ]


def fit_curve(
    outcomes: Sequence[Outcome],
    hold: float = HOLD,
    confidence: float = 0.90,
    bounds: tuple[float, float] | None = None,
    precision: float = 0.05,
    span: float = FIT_SPAN,
) -> HoldingCurve | None:
    """The holding curve of ``outcomes`` by maximum likelihood: its ``hold`` and 0.5
    points with their profile-likelihood intervals at ``confidence`` (an interval None
    where the profile does not fall through its cut within ``bounds``, the rates
    searched; default half the lowest trial's to twice the highest's), ``steep`` when
    the two are within ``precision``.
    None: no curve (no trial held, or none broke, or one rate only, or the margins do
    not fall with the rate)."""
    if not 0.5 < hold < 1 or not 0 < confidence < 1:
        raise ValueError("need 0.5 < hold < 1 and 0 < confidence < 1")
    return _curve(_prepare(outcomes, span), outcomes, hold, confidence, bounds, precision)


_Prepared = tuple[_Data, _Fit, "np.ndarray | None"]


def _usable(outcomes: Sequence[Outcome]) -> bool:
    held = sum(o.held for o in outcomes)
    return 0 < held < len(outcomes) and len({o.rate for o in outcomes}) >= 2


def _prepare(
    outcomes: Sequence[Outcome], span: float, start: _Fit | None = None
) -> _Prepared | None:
    if not _usable(outcomes):
        return None
    d = _data(outcomes, span)
    fit, cov = _full_fit(d, start)
    return d, fit, cov


def _curve(
    prepared: _Prepared | None, outcomes: Sequence[Outcome], hold: float, confidence: float,
    bounds: tuple[float, float] | None, precision: float, intervals: bool = True,
) -> HoldingCurve | None:
    """The curve of a prepared fit; ``intervals`` False: its points only (the search's
    placing of trials needs no more)."""
    if prepared is None:
        return None
    d, fit, cov = prepared
    if fit.beta <= 0:
        return None
    rates = [o.rate for o in outcomes]
    low, high = bounds or (min(rates) / 2, max(rates) * 2)
    limits = (math.log(low) - d.centre, math.log(high) - d.centre)
    z_hold = float(special.ndtri(hold))
    crit = _critical(confidence, d.n) if intervals else None
    found: list[tuple[float, float] | None] = [None, None]
    if crit is not None:
        cuts = []
        for z in (z_hold, 0.0):
            grad = np.array([1 / fit.beta, -(fit.alpha - z) / fit.beta**2, 0.0])
            cuts.append(fit.loglik - _robust_ratio(d, fit, cov, grad) * crit / 2)
        found = _share_intervals(d, fit, cov, (z_hold, 0.0), limits, cuts)
    points = []
    for (share, z), interval in zip(((hold, z_hold), (HALF, 0.0)), found, strict=True):
        xq = (fit.alpha - z) / fit.beta
        if interval is not None and limits[0] <= xq <= limits[1]:
            ends = (math.exp(interval[0] + d.centre), math.exp(interval[1] + d.centre))
        else:
            ends = None
        points.append(SharePoint(share, math.exp(xq + d.centre), ends))
    band = None
    steep = False
    strict = _critical(STEEP_CONFIDENCE, d.n) if crit is not None else None
    if crit is not None and strict is not None:
        scale = _robust_ratio(d, fit, cov, np.array([0.0, 1.0, 0.0]))
        low_b, high_b, strict_b = _slope_bounds(d, fit, cov, [
            (-1, fit.loglik - scale * crit / 2), (1, fit.loglik - scale * crit / 2),
            (-1, fit.loglik - scale * strict / 2),
        ])
        widest = z_hold / 50  # a band wider than e^50: unbounded
        if high_b is not None:
            band = (
                math.exp(z_hold / high_b),
                math.exp(z_hold / low_b) if low_b is not None and low_b > widest else None,
            )
        # One number for both shares is a claim, made at a confidence stricter than the
        # intervals': a wide band whose few trials fell in order by chance looks steep.
        # And on margins measured: held and broken trials that happen to fall apart, every
        # margin censored, say no more of the slope than that they fell apart.
        steep = strict_b is not None and strict_b > widest and len(d.y) >= MIN_MEASURED and (
            math.exp(z_hold / strict_b) <= 1 + precision
        )
    s = 1 / fit.h
    b = fit.beta * s
    a = fit.alpha * s + b * d.centre
    return HoldingCurve(
        a, b, s, confidence, points[0], points[1], band, steep, d.n, (min(rates), max(rates)),
    )


def _wald_widths(
    d: _Data, fit: _Fit, cov: np.ndarray | None, hold: float, confidence: float
) -> tuple[float, float] | None:
    """The two points' intervals' half-widths in log rate by the delta method: a cheap
    first look (the search computes the profiles only when these near its target)."""
    if fit.beta <= 0 or cov is None or not np.isfinite(cov).all():
        return None
    zc = float(special.ndtri(0.5 + confidence / 2))
    widths = []
    for z in (float(special.ndtri(hold)), 0.0):
        grad = np.array([1 / fit.beta, -(fit.alpha - z) / fit.beta**2, 0.0])
        var = float(grad @ cov @ grad)
        if not var > 0:
            return None
        widths.append(zc * math.sqrt(var))
    return widths[0], widths[1]


def _share_intervals(
    d: _Data, fit: _Fit, cov: np.ndarray | None, zs: Sequence[float],
    limits: tuple[float, float], cuts: Sequence[float],
) -> list[tuple[float, float] | None]:
    """The profile-likelihood interval of each share's centred log rate x_q (where the
    hold score alpha - beta x is z): the curve re-parametrised with alpha = z + beta x_q,
    beta and h maximised for each x_q; None where it is not bounded within ``limits``."""
    centres, ladders = [], []
    for z in zs:
        xq = (fit.alpha - z) / fit.beta
        se = 0.05
        if cov is not None:
            grad = np.array([1 / fit.beta, -(fit.alpha - z) / fit.beta**2, 0.0])
            var = float(grad @ cov @ grad)
            if var > 0 and math.isfinite(var):
                se = max(1e-4, math.sqrt(var))
        down = np.maximum(xq - se * LADDER, limits[0])
        up = np.minimum(xq + se * LADDER, limits[1])
        ladders += [np.append(down, limits[0]), np.append(up, limits[1])]
        centres += [xq, xq]
    z_rows = np.repeat(np.asarray(zs, dtype=float), 2)

    def profile(
        rows: np.ndarray, xq: np.ndarray, u: np.ndarray, h: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        z = z_rows[rows][:, None]
        return _profile(
            d, z + 0 * d.xu, xq[:, None] - d.xu, z + 0 * d.xc, xq[:, None] - d.xc, u, h,
            -BETA_MAX, BETA_MAX,
        )

    ends = _crossings(
        profile, np.arange(len(ladders)), np.array(centres), np.vstack(ladders),
        (fit.beta, fit.h), fit.loglik, np.repeat(np.asarray(cuts, dtype=float), 2),
    )
    out: list[tuple[float, float] | None] = []
    for i in range(len(zs)):
        low, high = ends[2 * i], ends[2 * i + 1]
        out.append(None if low is None or high is None else (low, high))
    return out


def _slope_bounds(
    d: _Data, fit: _Fit, cov: np.ndarray | None, cuts: Sequence[tuple[int, float]]
) -> list[float | None]:
    """Where beta's profile (alpha and h maximised for each beta) falls through each cut,
    going down (-1) or up (+1) from the estimate; None where it does not before 0 (a flat
    curve is not ruled out) or BETA_MAX."""
    se = 0.3 * fit.beta
    if cov is not None and cov[1, 1] > 0 and math.isfinite(cov[1, 1]):
        se = math.sqrt(float(cov[1, 1]))
    ladders = np.vstack([
        np.append(np.maximum(fit.beta - se * LADDER, 0.0), 0.0) if way < 0
        else np.append(np.minimum(fit.beta + se * LADDER, BETA_MAX), BETA_MAX)
        for way, _ in cuts
    ])

    def profile(
        rows: np.ndarray, beta: np.ndarray, u: np.ndarray, h: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        b = beta[:, None]
        return _profile(
            d, -b * d.xu, np.ones((len(beta), len(d.xu))), -b * d.xc,
            np.ones((len(beta), len(d.xc))), u, h, -ALPHA_MAX, ALPHA_MAX,
        )

    return _crossings(
        profile, np.arange(len(cuts)), np.full(len(cuts), fit.beta), ladders,
        (fit.alpha, fit.h), fit.loglik, np.array([cut for _, cut in cuts]),
    )
