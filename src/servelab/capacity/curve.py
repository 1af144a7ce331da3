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

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special, stats

from servelab.capacity.search import MARGIN_SPAN, Estimate, Outcome, SearchSettings

HOLD = 0.9  # the planning share: the rate held in 9 trials of 10
HALF = 0.5
FIT_SPAN = 2.0  # log margins past +-log 2 are censored: the fit reads only "far" there
STEEP_CONFIDENCE = 0.99  # "steep" (one number for both shares) is claimed at 99 %,
MIN_MEASURED = 5  # with 5 margins measured (not censored) at least
# The search.
MIN_FITTED = 10  # trials before the search may stop
MIN_EACH = 3  # held and broken trials near the band before it may stop
MIN_WIDE = 16  # trials before it may stop with two numbers (a band, not steep)
NEAR = math.log(1.10)  # "near the band": within 10 % of [r_hold, r_half]
STEP = 0.02  # a refining trial sits 2 % to one side of the point it aims at
WALD_SLACK = 1.5  # the profiles are computed once the delta method's widths are this near
# The numbers' bounds (Olsen's parameters: alpha, beta = b / s, h = 1 / s).
H_BOUNDS = (0.05, 100.0)  # the log margin's noise s between 0.01 and 20
BETA_MAX = 2000.0  # the curve rises from 0.5 to 0.9 over 0.06 % of the rate at the most
ALPHA_MAX = 60.0
LADDER = np.array([0.5, 1, 1.5, 2, 3, 4.5, 7, 10, 15, 25, 40, 70])  # standard errors out
_LOG_ROOT_2PI = 0.5 * math.log(2 * math.pi)


@dataclass(frozen=True)
class _Data:
    """The fitted trials, their log rates centred: those whose log margin was measured
    (``xu``, ``y``) and those censored (``xc``: held far, broke far, or broke on errors),
    each censored one as log Phi(sign * eta + k * h) (see ``_profile_terms``)."""

    centre: float  # the log rate subtracted from every x
    xu: np.ndarray
    y: np.ndarray
    xc: np.ndarray
    sign: np.ndarray  # +1: m >= c (held, far); -1: m <= -c (broke, far) or m < 0 (errors)
    k: np.ndarray  # -c, or 0 for errors
    log_h_weight: float  # the measured margins' count less the line's 2 (REML's weight)

    @property
    def n(self) -> int:
        return len(self.xu) + len(self.xc)

    @property
    def x(self) -> np.ndarray:
        return np.concatenate([self.xu, self.xc])


def _data(outcomes: Sequence[Outcome], span: float) -> _Data:
    centre = sum(math.log(o.rate) for o in outcomes) / len(outcomes)
    c = math.log(span)
    xu: list[float] = []
    y: list[float] = []
    censored: list[tuple[float, float, float]] = []  # x, sign, k
    for o in outcomes:
        x = math.log(o.rate) - centre
        m = math.log(o.margin) if o.margin > 0 else -math.inf
        if o.errors_broke:  # broke: m < 0, nothing more (its latency is of the answered)
            censored.append((x, -1.0, 0.0))
        elif m >= c:  # m >= c: Phi(eta - h c)
            censored.append((x, 1.0, -c))
        elif m <= -c:  # m <= -c: Phi(-eta - h c)
            censored.append((x, -1.0, -c))
        else:
            xu.append(x)
            y.append(m)
    # REML: the noise's estimate counts the measured margins less the line's two
    # parameters (ML's s is low by (n - 2) / n, the band then too narrow).
    weight = max(0.5, len(xu) - 2.0)
    xc, sign, k = (np.array([t[i] for t in censored], dtype=float) for i in range(3))
    return _Data(centre, np.array(xu), np.array(y), xc, sign, k, weight)


Derivatives = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _profile_terms(
    d: _Data, off_u: np.ndarray, coef_u: np.ndarray, off_c: np.ndarray, coef_c: np.ndarray,
    u: np.ndarray, h: np.ndarray,
) -> Derivatives:
    """Rows of curves whose hold score is eta = off + u * coef (rows x trials), h = 1 / s:
    each row's log-likelihood and its derivatives in (u, h): ll, g_u, g_h, H_uu, H_uh,
    H_hh. Olsen's parameters (eta = (a - b x) / s, h = 1 / s) make the Tobit
    log-likelihood concave; a trial whose log margin y was measured counts
    log h - (h y - eta)^2 / 2, a censored one log Phi(sign * eta + k * h)."""
    hc = h[:, None]
    eta = off_u + u[:, None] * coef_u
    resid = hc * d.y - eta
    nu = d.log_h_weight
    ll = nu * np.log(h) - len(d.y) * _LOG_ROOT_2PI - 0.5 * (resid * resid).sum(1)
    g_u = (resid * coef_u).sum(1)
    g_h = nu / h - (resid * d.y).sum(1)
    h_uu = -(coef_u * coef_u).sum(1)
    h_uh = (d.y * coef_u).sum(1)
    h_hh = -nu / (h * h) - float((d.y * d.y).sum())
    if len(d.xc):
        v = d.sign * (off_c + u[:, None] * coef_c) + d.k * hc
        log_cdf = special.log_ndtr(v)
        lam = np.exp(-0.5 * v * v - _LOG_ROOT_2PI - log_cdf)  # phi / Phi, stably
        w = -lam * (v + lam)
        sc = d.sign * coef_c
        ll = ll + log_cdf.sum(1)
        g_u = g_u + (lam * sc).sum(1)
        g_h = g_h + (lam * d.k).sum(1)
        h_uu = h_uu + (w * sc * sc).sum(1)
        h_uh = h_uh + (w * sc * d.k).sum(1)
        h_hh = h_hh + (w * d.k * d.k).sum(1)
    return ll, g_u, g_h, h_uu, h_uh, h_hh


@dataclass(frozen=True)
class _Fit:
    alpha: float  # the hold score at the centre
    beta: float  # its fall per unit of log rate
    h: float  # 1 / s
    loglik: float
    centre: float


def _full_fit(d: _Data, start: _Fit | None = None) -> tuple[_Fit, np.ndarray | None]:
    """Maximum likelihood by Newton's method (concave: from any start), projected on the
    bounds; and the estimates' covariance (the inverse of the observed information; None
    where it is singular). Three parameters (alpha, beta, h); eta = alpha - beta x."""
    x = d.x
    held = float(np.mean(np.concatenate([d.y >= 0, d.sign > 0])))
    theta = np.array([
        float(special.ndtri(min(0.9, max(0.1, held)))), 1.0 / (float(np.std(x)) or 0.1), 2.0,
    ])
    if start is not None:  # the previous trial's fit, as alpha at this centre
        theta = np.array([start.alpha - start.beta * (d.centre - start.centre), start.beta,
                          start.h])
    xu, y, xc = d.xu, d.y, d.xc
    nu, w_h = len(y), d.log_h_weight
    sx, sxx, sy, sxy, syy = xu.sum(), (xu * xu).sum(), y.sum(), (xu * y).sum(), (y * y).sum()

    def evaluate(t: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        alpha, beta, h = float(t[0]), float(t[1]), float(t[2])
        resid = h * y - (alpha - beta * xu)
        ll = w_h * math.log(h) - nu * _LOG_ROOT_2PI - 0.5 * float((resid * resid).sum())
        g = np.array([
            float(resid.sum()), -float((resid * xu).sum()), w_h / h - float((resid * y).sum()),
        ])
        hess = np.array([
            [-nu, sx, sy], [sx, -sxx, -sxy], [sy, -sxy, -w_h / (h * h) - syy],
        ], dtype=float)
        if len(xc):
            v = d.sign * (alpha - beta * xc) + d.k * h
            log_cdf = special.log_ndtr(v)
            lam = np.exp(-0.5 * v * v - _LOG_ROOT_2PI - log_cdf)
            w = -lam * (v + lam)
            sl, skw = d.sign * lam, d.sign * d.k * w
            ll += float(log_cdf.sum())
            g += np.array([float(sl.sum()), -float((sl * xc).sum()), float((d.k * lam).sum())])
            wx = w * xc
            hess += np.array([
                [w.sum(), -wx.sum(), skw.sum()],
                [-wx.sum(), (wx * xc).sum(), -(skw * xc).sum()],
                [skw.sum(), -(skw * xc).sum(), (d.k * d.k * w).sum()],
            ])
        return ll, g, hess

    lo = np.array([-ALPHA_MAX, -BETA_MAX, H_BOUNDS[0]])
    hi = np.array([ALPHA_MAX, BETA_MAX, H_BOUNDS[1]])
    ll, g, hess = evaluate(theta)
    for _ in range(100):
        # A parameter at its bound, the gradient pushing it out, stays there.
        free = ~(((theta <= lo) & (g < 0)) | ((theta >= hi) & (g > 0)))
        step = np.zeros(3)
        if free.any():
            step[free] = _newton_step(hess[np.ix_(free, free)], g[free])
        scale = 1.0
        while True:
            trial = np.clip(theta + scale * step, lo, hi)
            ll_new, g_new, hess_new = evaluate(trial)
            if ll_new >= ll - 1e-12 or scale < 1e-4:
                break
            scale /= 2
        if ll_new < ll - 1e-12:
            break
        gained = ll_new - ll
        theta, ll, g, hess = trial, ll_new, g_new, hess_new
        if gained < 1e-9:  # converged (or along a flat ridge: separated trials)
            break
    cov = None
    with contextlib.suppress(np.linalg.LinAlgError):
        cov = np.linalg.inv(-hess)
    return _Fit(float(theta[0]), float(theta[1]), float(theta[2]), ll, d.centre), cov


def _robust_ratio(d: _Data, fit: _Fit, cov: np.ndarray | None, grad: np.ndarray) -> float:
    """How much wider the sandwich (robust) variance of grad . theta is than the model's,
    at least 1: the trials' scores scattered more than the model's curvature says (a
    margin's distribution not normal about a line). Scores with HC1's n / (n - 3)."""
    if cov is None or d.n <= 3:
        return 1.0
    resid = fit.h * d.y - (fit.alpha - fit.beta * d.xu)
    per_h = d.log_h_weight / max(1, len(d.y)) / fit.h  # REML's log h weight, shared out
    scores = [np.column_stack([resid, -d.xu * resid, per_h - resid * d.y])]
    if len(d.xc):
        v = d.sign * (fit.alpha - fit.beta * d.xc) + d.k * fit.h
        lam = np.exp(-0.5 * v * v - _LOG_ROOT_2PI - special.log_ndtr(v))
        scores.append(np.column_stack([d.sign * lam, -d.xc * d.sign * lam, d.k * lam]))
    sc = np.vstack(scores)
    if not np.isfinite(sc).all() or not np.isfinite(cov).all():
        return 1.0
    meat = sc.T @ sc * d.n / (d.n - 3)
    model = float(grad @ cov @ grad)
    sandwich = float(grad @ cov @ meat @ cov @ grad)
    if not model > 0 or not math.isfinite(sandwich):
        return 1.0
    return max(1.0, sandwich / model)


def _newton_step(hess: np.ndarray, g: np.ndarray) -> np.ndarray:
    """-H^-1 g, H made negative definite where it is not (a censored-only direction)."""
    try:
        eig, vec = np.linalg.eigh(hess)
    except np.linalg.LinAlgError:
        return g * 1e-3
    eig = np.minimum(eig, -1e-6 * max(1.0, float(np.max(np.abs(eig)))))
    return -(vec @ ((vec.T @ g) / eig))


def _profile(
    d: _Data, off_u: np.ndarray, coef_u: np.ndarray, off_c: np.ndarray, coef_c: np.ndarray,
    u: np.ndarray, h: np.ndarray, lo: float, hi: float, iterations: int = 50,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The log-likelihood maximised, one row each, over u in [lo, hi] and h (see
    ``_profile_terms``): Newton's method, batched, from the rows' (u, h). Returns the
    maxima and where they are."""
    u, h = u.astype(float), h.astype(float)
    now = _profile_terms(d, off_u, coef_u, off_c, coef_c, u, h)
    active = np.ones(len(u), dtype=bool)
    for _ in range(iterations):
        ll, gu, gh, huu, huh, hhh = now
        # A parameter at its bound, the gradient pushing it out, stays there.
        u_fixed = ((u <= lo) & (gu < 0)) | ((u >= hi) & (gu > 0))
        h_fixed = ((h <= H_BOUNDS[0]) & (gh < 0)) | ((h >= H_BOUNDS[1]) & (gh > 0))
        det = huu * hhh - huh * huh
        ok = (huu < 0) & (hhh < 0) & (det > 0)
        safe = np.where(ok, det, 1.0)
        su = np.where(ok, -(hhh * gu - huh * gh) / safe, gu / np.maximum(1.0, np.abs(huu)))
        sh = np.where(ok, -(huu * gh - huh * gu) / safe, gh / np.maximum(1.0, np.abs(hhh)))
        # One of them fixed: Newton's step in the other alone.
        su = np.where(h_fixed, -gu / np.minimum(huu, -1e-9), su)
        sh = np.where(u_fixed, -gh / np.minimum(hhh, -1e-9), sh)
        su = np.where(u_fixed, 0.0, su)
        sh = np.where(h_fixed, 0.0, sh)
        scale = np.where(active, 1.0, 0.0)
        for _ in range(16):
            nu = np.clip(u + scale * su, lo, hi)
            nh = np.clip(h + scale * sh, *H_BOUNDS)
            new = _profile_terms(d, off_u, coef_u, off_c, coef_c, nu, nh)
            worse = new[0] < ll - 1e-12
            if not worse.any():
                break
            scale = np.where(worse, scale / 2, scale)
        keep = new[0] >= ll - 1e-12
        # A row that gains nothing more has converged (or is held by its bounds).
        active &= keep & (new[0] - ll > 1e-9)
        u, h = np.where(keep, nu, u), np.where(keep, nh, h)
        now = tuple(  # type: ignore[assignment]
            np.where(keep, a, b) for a, b in zip(new, now, strict=True)
        )
        if not active.any():
            break
    return now[0], u, h


def _critical(confidence: float, n: int) -> float | None:
    """Twice the log-likelihood's drop that bounds an interval at ``confidence``: Wilks's
    chi2(1) in its small-sample form for a normal model with 3 parameters,
    n log(1 + t^2 / (n - 3)), t of n - 3 degrees of freedom (exact there for a linear
    function of the line; 3.2 against chi2's 2.7 at 24 trials, 5.0 at 10). None: too
    few trials for any."""
    df = n - 3
    if df < 1:
        return None
    t = float(stats.t.ppf(0.5 + confidence / 2, df))
    return n * math.log1p(t * t / df)


Profile = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, ...]]


def _crossings(
    profile: Profile, rows: np.ndarray, centres: np.ndarray, ladders: np.ndarray,
    start: tuple[float, float], top: float, cuts: np.ndarray, tolerance: float = 2e-5,
    steps: int = 10,
) -> list[float | None]:
    """For each side (a row of ``ladders``: values going outwards from its centre, where
    the profile is ``top``, the maximum; its profile's parameters in ``rows``): where the
    profile falls through its cut first, found by regula falsi (Illinois) from the
    ladder's rungs; None where it stays above the cut to the ladder's end.
    ``profile(rows, values, u, h)``: the maxima, and where they are."""
    sides, rungs = ladders.shape
    every = np.repeat(rows, rungs)
    values, us, hs = profile(
        every, ladders.ravel(), np.full(every.shape, start[0]), np.full(every.shape, start[1])
    )
    values, us, hs = (v.reshape(sides, rungs) for v in (values, us, hs))
    found: list[float | None] = [None] * sides
    picked, inner, outer, f_in, f_out, u0, h0 = [], [], [], [], [], [], []
    for i in range(sides):
        cut = cuts[i]
        below = values[i] < cut
        if not below.any():
            continue
        k = int(np.argmax(below))
        picked.append(i)
        inner.append(centres[i] if k == 0 else ladders[i, k - 1])
        f_in.append(top - cut if k == 0 else values[i, k - 1] - cut)
        outer.append(ladders[i, k])
        f_out.append(values[i, k] - cut)
        u0.append(us[i, k])
        h0.append(hs[i, k])
    if not picked:
        return found
    a, b = np.array(inner), np.array(outer)
    fa, fb = np.array(f_in), np.array(f_out)
    u, h = np.array(u0), np.array(h0)
    at = rows[picked]
    cut_at = cuts[picked]
    kept = np.zeros(len(picked))
    for _ in range(steps):
        if float(np.max(np.abs(b - a))) < tolerance:
            break
        x = b - fb * (b - a) / (fb - fa)
        fx, u, h = profile(at, x, u, h)
        fx = fx - cut_at
        above = fx >= 0
        # Illinois: halve the end's value that stayed put twice running.
        fa_new = np.where(above, fx, np.where(kept < 0, fa / 2, fa))
        fb_new = np.where(above, np.where(kept > 0, fb / 2, fb), fx)
        a, b = np.where(above, x, a), np.where(above, b, x)
        fa, fb = fa_new, fb_new
        kept = np.where(above, 1.0, -1.0)
    for j, i in enumerate(picked):
        found[i] = float(b[j] - fb[j] * (b[j] - a[j]) / (fb[j] - fa[j]))
    return found


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


@dataclass
class QuantileSearch:
    """The capacity search on the holding curve (ask/tell, search.Search): brackets as
    search.CapacitySearch does (up by ``factor`` from the start, down while it breaks,
    then between the highest held and the lowest broken while they are more than 4 %
    apart), then places each trial 2 % to one side of the current estimate of the rate
    held in ``hold`` of trials or of the rate held in half, in turn; stops once both
    points' intervals (a steep curve's one point's) are within the settings'
    half-width, or at its trial budget."""

    settings: SearchSettings
    hold: float = HOLD
    outcomes: list[Outcome] = field(default_factory=list)
    _cache: dict[str, tuple[int, Any]] = field(default_factory=dict, repr=False)
    _refining: int = 0

    def tell(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def _prepared(self) -> _Prepared | None:
        def make() -> _Prepared | None:
            before: _Prepared | None = self._cache.get("prepared", (0, None))[1]
            start = before[1] if before is not None and before[1].beta > 0 else None
            return _prepare(self.outcomes, FIT_SPAN, start)

        return self._cached("prepared", make)

    def _fit(self, intervals: bool) -> HoldingCurve | None:
        s = self.settings
        return self._cached("curve" if intervals else "points", lambda: _curve(
            self._prepared(), self.outcomes, self.hold, s.confidence,
            (s.min_rate, s.max_rate), s.half_width, intervals,
        ))

    def _cached(self, key: str, make: Callable[[], object]) -> Any:
        held = self._cache.get(key)
        if held is None or held[0] != len(self.outcomes):
            held = (len(self.outcomes), make())
            self._cache[key] = held
        return held[1]

    def curve(self) -> HoldingCurve | None:
        """The holding curve of the trials so far (None: none yet)."""
        return self._fit(intervals=True)

    def _may_stop(self, points: HoldingCurve | None) -> bool:
        """Enough trials, held and broken near the band, for intervals to be read: with
        few, the margins of three trials in a row can look precise by chance."""
        if points is None or points.fitted < MIN_FITTED:
            return False
        low, high = points.hold.rate * math.exp(-NEAR), points.half.rate * math.exp(NEAR)
        near = [o for o in self.outcomes if low <= o.rate <= high]
        held = sum(o.held for o in near)
        return min(held, len(near) - held) >= MIN_EACH

    def done(self) -> bool:
        """Whether the intervals are within the target (the search is over)."""
        if len(self.outcomes) < MIN_FITTED or not self._may_stop(self._fit(intervals=False)):
            return False
        s = self.settings
        prepared = self._prepared()
        wald = None if prepared is None else _wald_widths(*prepared, self.hold, s.confidence)
        if wald is None or wald[0] > WALD_SLACK * math.log1p(s.half_width):
            return False  # far from it: no need for the profiles yet
        curve = self.curve()
        if curve is None or (not curve.steep and curve.fitted < MIN_WIDE):
            return False
        read = (curve.hold,) if curve.steep else (curve.hold, curve.half)
        return all(
            p.relative_half_width is not None and p.relative_half_width <= s.half_width
            for p in read
        )

    def next_rate(self) -> float | None:
        """The rate of the next trial, or None when the search is over."""
        s = self.settings
        if not self.outcomes:
            return s.start_rate
        if len(self.outcomes) >= s.max_trials:
            return None
        held = max((o.rate for o in self.outcomes if o.held), default=None)
        broken = min((o.rate for o in self.outcomes if not o.held), default=None)
        if broken is None:  # still bracketing upwards
            assert held is not None
            return None if held >= s.max_rate else min(s.max_rate, held * s.factor)
        if held is None:  # broke from the start: downwards
            return None if broken <= s.min_rate else max(s.min_rate, broken / s.factor)
        if broken / held > math.exp(2 * STEP):  # held and broken apart: the bracket first
            return self._between(held, broken)
        if self.done():
            return None
        curve = self._fit(intervals=False)
        if curve is None or not s.min_rate <= curve.hold.rate <= curve.half.rate <= s.max_rate:
            return self._between(held, broken)
        # In turn: below the planning point, above the half point, above the planning
        # point, below the half point (on a steep curve: 2 % either side of the one).
        k = self._refining
        self._refining += 1
        aim = (curve.hold, curve.half)[k % 2].rate
        rate = aim * math.exp((-1, 1, 1, -1)[k % 4] * STEP)
        return min(s.max_rate, max(s.min_rate, rate))

    def _between(self, held: float, broken: float) -> float:
        """A bracket's next trial: where the log margin, interpolated between the highest
        held and the lowest broken trial, crosses 0 (kept off the ends), or their
        geometric mean when errors broke the SLO, a margin is past search.MARGIN_SPAN, or
        noise inverted the two."""
        low = max((o for o in self.outcomes if o.rate == held), key=lambda o: o.margin)
        high = min((o for o in self.outcomes if o.rate == broken), key=lambda o: o.margin)
        inside = high.margin > 1 / MARGIN_SPAN and low.margin < MARGIN_SPAN
        if held >= broken or high.errors_broke or not inside:
            return math.sqrt(held * broken)
        share = math.log(low.margin) / (math.log(low.margin) - math.log(high.margin))
        return held * (broken / held) ** min(0.8, max(0.2, share))

    def estimate(self) -> Estimate:
        """search.Estimate, as the rest of servelab reads a capacity: the planning point
        (the rate held in ``hold`` of trials) and its interval."""
        s = self.settings
        held = max((o.rate for o in self.outcomes if o.held), default=None)
        broken = min((o.rate for o in self.outcomes if not o.held), default=None)
        below_min = held is None and broken is not None and broken <= s.min_rate
        above_max = broken is None and held is not None and held >= s.max_rate
        curve = self.curve() if held is not None and broken is not None else None
        rate: float | None = None
        interval = None
        if curve is not None and s.min_rate <= curve.hold.rate <= s.max_rate:
            rate, interval = curve.hold.rate, curve.hold.interval
        if rate is None and held is not None and broken is not None:
            rate = math.sqrt(held * broken)
        if below_min:
            rate = None
        if above_max:
            rate = held
        return Estimate(
            rate, interval, held, broken, below_min, above_max,
            curve.fitted if curve is not None else 0,
        )
