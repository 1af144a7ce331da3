"""DOCSTRING PLACEHOLDER"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special, stats

from servelab.capacity.search import MARGIN_SPAN, Estimate, Outcome, SearchSettings

HOLD = 0.9  # the planning share: the rate held in 9 trials of 10
HALF = 0.5
SPAN = MARGIN_SPAN  # log margins past +-log(SPAN) are censored ("far")
WINDOW = math.log(1.25)  # fitted: trials within 25 % of the band (by rate, never by margin)
H_BOUNDS = (0.05, 100.0)  # 1 / s: the log margin's noise between 0.01 and 20
BETA_MAX = 2000.0  # b / s: the curve rises from 0.5 to 0.9 over 0.06 % of the rate at most
ALPHA_MAX = 60.0
_LOG_ROOT_2PI = 0.5 * math.log(2 * math.pi)


@dataclass(frozen=True)
class _Data:
    """The fitted trials, their log rates centred: those whose log margin was measured
    (``xu``, ``y``) and those censored (``xc``: held far, broke far, or broke on errors),
    each censored one as log Phi(sign * eta + k * h) (see ``_censored``)."""

    centre: float  # the log rate subtracted from every x
    xu: np.ndarray
    y: np.ndarray
    xc: np.ndarray
    sign: np.ndarray  # +1: m >= c (held, far); -1: m <= -c (broke, far) or m < 0 (errors)
    k: np.ndarray  # -c, or 0 for errors
    log_h_weight: float = 0.0  # the uncensored trials' count, less the line's 2 (REML)

    @property
    def n(self) -> int:
        return len(self.xu) + len(self.xc)

    @property
    def x(self) -> np.ndarray:
        return np.concatenate([self.xu, self.xc])


def _data(outcomes: Sequence[Outcome], span: float, reml: bool = False) -> _Data:
    centre = sum(math.log(o.rate) for o in outcomes) / len(outcomes)
    c = math.log(span)
    xu, y, xc, sign, k = [], [], [], [], []
    for o in outcomes:
        x = math.log(o.rate) - centre
        m = math.log(o.margin) if o.margin > 0 else -math.inf
        if o.errors_broke:  # broke: m < 0, nothing more (its latency is of the answered)
            xc.append(x), sign.append(-1.0), k.append(0.0)
        elif m >= c:  # m >= c: Phi(eta - h c)
            xc.append(x), sign.append(1.0), k.append(-c)
        elif m <= -c:  # m <= -c: Phi(-eta - h c)
            xc.append(x), sign.append(-1.0), k.append(-c)
        else:
            xu.append(x), y.append(m)
    weight = max(0.5, len(xu) - 2.0) if reml else float(len(xu))
    return _Data(centre, *(np.array(v, dtype=float) for v in (xu, y, xc, sign, k)), weight)


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


def _full_fit(d: _Data) -> tuple[_Fit, np.ndarray | None]:
    """Maximum likelihood by Newton's method (concave: from any start), projected on the
    bounds; and the estimates' covariance (the inverse of the observed information; None
    where it is singular). Three parameters (alpha, beta, h); eta = alpha - beta x."""
    x = d.x
    held = float(np.mean(np.concatenate([d.y >= 0, d.sign > 0])))
    theta = np.array([
        float(special.ndtri(min(0.9, max(0.1, held)))), 1.0 / (float(np.std(x)) or 0.1), 2.0,
    ])
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
        moved = float(np.max(np.abs(trial - theta)))
        gained = ll_new - ll
        theta, ll, g, hess = trial, ll_new, g_new, hess_new
        if gained < 1e-10 and moved < 1e-7:
            break
    cov = None
    try:
        cov = np.linalg.inv(-hess)
    except np.linalg.LinAlgError:
        pass
    return _Fit(float(theta[0]), float(theta[1]), float(theta[2]), ll), cov


def _robust_ratio(d: _Data, fit: _Fit, cov: np.ndarray | None, grad: np.ndarray) -> float:
    """How much wider the sandwich (robust) variance of grad . theta is than the model's,
    at least 1: the trials' scores scattered more than the model's curvature says (a
    margin's distribution not normal about a line). Scores with HC1's n / (n - 3)."""
    if cov is None or d.n <= 3:
        return 1.0
    resid = fit.h * d.y - (fit.alpha - fit.beta * d.xu)
    scores = [np.column_stack([resid, -d.xu * resid, 1 / fit.h - resid * d.y])]
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
        now = tuple(np.where(keep, a, b) for a, b in zip(new, now, strict=True))  # type: ignore[assignment]
        if not active.any():
            break
    return now[0], u, h


def _critical(confidence: float, n: int, calibration: str) -> float | None:
    """Twice the log-likelihood's drop that bounds the interval: Wilks's chi2(1), or
    ('t') its small-sample form in a normal model with 3 parameters, n log(1 + t^2 / (n - 3)),
    t of n - 3 degrees of freedom (None: too few trials for any)."""
    if calibration == "chi2":
        return float(stats.chi2.ppf(confidence, 1))
    df = n - 3
    if df < 1:
        return None
    t = float(stats.t.ppf(0.5 + confidence / 2, df))
    return n * math.log1p(t * t / df)


Profile = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, ...]]


def _crossings(
    profile: Profile, rows: np.ndarray, centres: np.ndarray, ladders: np.ndarray,
    start: tuple[float, float], cuts: np.ndarray, tolerance: float = 2e-5, steps: int = 10,
) -> list[float | None]:
    """For each side (a row of ``ladders``: values going outwards from its centre, its
    profile's parameters in ``rows``): where the profile falls through ``cut`` first,
    found by regula falsi (Illinois) from the ladder's rungs; None where it stays above
    ``cut`` to the ladder's end. ``profile(rows, values, u, h)``: the maxima, and where."""
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
        f_in.append(math.inf if k == 0 else values[i, k - 1] - cut)
        outer.append(ladders[i, k])
        f_out.append(values[i, k] - cut)
        u0.append(us[i, k])
        h0.append(hs[i, k])
    if not picked:
        return found
    a, b = np.array(inner), np.array(outer)
    fa, fb = np.array(f_in), np.array(f_out)
    fa = np.where(np.isinf(fa), 2 * np.abs(fb) + 1.0, fa)  # the centre: lmax, above the cut
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
    bound it within the rates searched, at the confidence)."""

    share: float
    rate: float | None
    interval: tuple[float, float] | None

    @property
    def relative_half_width(self) -> float | None:
        if self.interval is None or not self.rate:
            return None
        return (self.interval[1] - self.interval[0]) / 2 / self.rate


@dataclass(frozen=True)
class HoldingCurve:
    """P(hold | rate) = Phi((a - b log rate) / s), fitted to the trials' log margins
    (m = a - b log rate + N(0, s^2), censored past +-log SPAN, broken-by-errors: m < 0).

    ``hold`` is the planning figure (the rate held in ``hold.share`` of trials), ``half``
    the rate held in half of them; ``band`` the interval of their ratio half / hold;
    ``steep``: the band is, at the confidence, within ``precision`` (one number says it:
    ``hold``)."""

    a: float
    b: float
    s: float
    confidence: float
    hold: SharePoint
    half: SharePoint
    band: tuple[float, float | None] | None  # r_half / r_hold: its interval (None: unbounded)
    steep: bool
    fitted: int  # trials fitted
    span: tuple[float, float]  # the fitted trials' rates (lowest, highest)

    @property
    def band_ratio(self) -> float | None:
        if self.hold.rate is None or self.half.rate is None:
            return None
        return self.half.rate / self.hold.rate

    def probability(self, rate: float) -> float:
        """The chance that a trial at ``rate`` holds the SLO."""
        return float(special.ndtr((self.a - self.b * math.log(rate)) / self.s))

    def rate_at(self, share: float) -> float:
        """The rate held in ``share`` of trials (the curve's quantile)."""
        return math.exp((self.a - self.s * float(special.ndtri(share))) / self.b)

    def points(
        self, low: float | None = None, high: float | None = None, count: int = 41
    ) -> list[tuple[float, float]]:
        """(rate, P(hold)) over [low, high] (default: the curve from 0.99 to 0.01, widened
        to the fitted trials), evenly in log rate: for drawing."""
        low = low or min(self.rate_at(0.99), self.span[0])
        high = high or max(self.rate_at(0.01), self.span[1])
        step = math.log(high / low) / max(1, count - 1)
        rates = [low * math.exp(i * step) for i in range(count)]
        return [(r, self.probability(r)) for r in rates]


def _usable(outcomes: Sequence[Outcome]) -> bool:
    held = [o for o in outcomes if o.held]
    broken = [o for o in outcomes if not o.held]
    return bool(held) and bool(broken) and len({o.rate for o in outcomes}) >= 2


def fit_curve(
    outcomes: Sequence[Outcome],
    hold: float = HOLD,
    confidence: float = 0.90,
    bounds: tuple[float, float] | None = None,
    precision: float = 0.05,
    span: float = SPAN,
    calibration: str = "t",
    reml: bool = False,
    robust: bool = False,
    intervals: bool = True,
) -> HoldingCurve | None:
    """The holding curve of ``outcomes`` by maximum likelihood, its ``hold`` and 0.5 points
    with profile-likelihood intervals at ``confidence`` (None where the profile stays
    above its cut up to ``bounds``, the rates searched: default the trials' own).
    None: no curve (no trial held, or none broke, or one rate only, or the margins do
    not fall with the rate)."""
    if not 0.5 < hold < 1 or not 0 < confidence < 1:
        raise ValueError("need 0.5 < hold < 1 and 0 < confidence < 1")
    return _curve(
        _prepare(outcomes, span, reml), outcomes, hold, confidence, bounds, precision,
        calibration, robust, intervals,
    )


_Prepared = tuple[_Data, _Fit, "np.ndarray | None"]


def _prepare(outcomes: Sequence[Outcome], span: float, reml: bool) -> _Prepared | None:
    if not _usable(outcomes):
        return None
    d = _data(outcomes, span, reml)
    fit, cov = _full_fit(d)
    return d, fit, cov


def _curve(
    prepared: _Prepared | None, outcomes: Sequence[Outcome], hold: float, confidence: float,
    bounds: tuple[float, float] | None, precision: float, calibration: str, robust: bool,
    intervals: bool,
) -> HoldingCurve | None:
    if prepared is None:
        return None
    d, fit, cov = prepared
    if fit.beta <= 0:
        return None
    rates = [o.rate for o in outcomes]
    low, high = bounds or (min(rates), max(rates))
    xlo, xhi = math.log(low) - d.centre, math.log(high) - d.centre
    z_hold = float(special.ndtri(hold))
    crit = _critical(confidence, d.n, calibration) if intervals else None
    points: list[SharePoint] = []
    found: list[tuple[float, float] | None] = [None, None]
    if crit is not None:
        cuts = []
        for z in (z_hold, 0.0):
            grad = np.array([1 / fit.beta, -(fit.alpha - z) / fit.beta**2, 0.0])
            scale = _robust_ratio(d, fit, cov, grad) if robust else 1.0
            cuts.append(fit.loglik - scale * crit / 2)
        found = _share_intervals(d, fit, cov, (z_hold, 0.0), (xlo, xhi), cuts)
    for (q, z), interval in zip(((hold, z_hold), (HALF, 0.0)), found, strict=True):
        xq = (fit.alpha - z) / fit.beta
        if not xlo <= xq <= xhi:
            interval = None
        points.append(SharePoint(
            q, math.exp(xq + d.centre),
            None if interval is None else (
                math.exp(interval[0] + d.centre), math.exp(interval[1] + d.centre)
            ),
        ))
    band = None
    if crit is not None:
        scale = _robust_ratio(d, fit, cov, np.array([0.0, 1.0, 0.0])) if robust else 1.0
        slopes = _slope_interval(d, fit, cov, fit.loglik - scale * crit / 2)
        if slopes is not None:
            lo_b, hi_b = slopes
            band = (
                math.exp(z_hold / hi_b),
                math.exp(z_hold / lo_b) if lo_b is not None and lo_b > z_hold / 50 else None,
            )
    steep = band is not None and band[1] is not None and band[1] <= 1 + precision
    s = 1 / fit.h
    b = fit.beta * s
    a = fit.alpha * s + b * d.centre
    return HoldingCurve(
        a, b, s, confidence, points[0], points[1], band, steep, d.n, (min(rates), max(rates)),
    )


LADDER = np.array([0.5, 1, 1.5, 2, 3, 4.5, 7, 10, 15, 25, 40, 70])


def _wald_widths(d: _Data, fit: _Fit, cov: np.ndarray | None, hold: float,
                 confidence: float) -> tuple[float, float] | None:
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

    def profile(rows: np.ndarray, xq: np.ndarray, u: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, ...]:
        z = z_rows[rows][:, None]
        return _profile(
            d, z + 0 * d.xu, xq[:, None] - d.xu, z + 0 * d.xc, xq[:, None] - d.xc, u, h,
            -BETA_MAX, BETA_MAX,
        )

    ends = _crossings(
        profile, np.arange(len(ladders)), np.array(centres), np.vstack(ladders),
        (fit.beta, fit.h), np.repeat(np.asarray(cuts, dtype=float), 2),
    )
    out: list[tuple[float, float] | None] = []
    for i in range(len(zs)):
        low, high = ends[2 * i], ends[2 * i + 1]
        out.append(None if low is None or high is None else (low, high))
    return out


def _slope_interval(
    d: _Data, fit: _Fit, cov: np.ndarray | None, cut: float
) -> tuple[float | None, float] | None:
    """beta's profile interval (alpha and h maximised for each beta): (lowest, highest);
    lowest None where it reaches 0 (a flat curve is not ruled out); None where the
    highest is not bounded either."""
    se = 0.3 * fit.beta
    if cov is not None and cov[1, 1] > 0 and math.isfinite(cov[1, 1]):
        se = math.sqrt(float(cov[1, 1]))
    down = np.maximum(fit.beta - se * LADDER, 0.0)
    up = np.minimum(fit.beta + se * LADDER, BETA_MAX)
    ladders = np.vstack([np.append(down, 0.0), np.append(up, BETA_MAX)])

    def profile(rows: np.ndarray, beta: np.ndarray, u: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, ...]:
        b = beta[:, None]
        return _profile(
            d, -b * d.xu, np.ones((len(beta), len(d.xu))), -b * d.xc,
            np.ones((len(beta), len(d.xc))), u, h, -ALPHA_MAX, ALPHA_MAX,
        )

    low, high = _crossings(
        profile, np.arange(2), np.array([fit.beta, fit.beta]), ladders, (fit.alpha, fit.h),
        np.array([cut, cut]),
    )
    if high is None:
        return None
    return low, high


def near_band(outcomes: Sequence[Outcome], window: float | None = WINDOW) -> list[Outcome]:
    """The trials fitted: those within ``window`` (in log rate) of the bracket's centre,
    the geometric mean of the highest rate held and the lowest broken, chosen by their
    rate, never by their margin (None: every trial)."""
    if window is None:
        return list(outcomes)
    held = [o.rate for o in outcomes if o.held]
    broken = [o.rate for o in outcomes if not o.held]
    if not held or not broken:
        return list(outcomes)
    centre = math.sqrt(max(held) * min(broken))
    return [o for o in outcomes if abs(math.log(o.rate / centre)) <= window]


MIN_FITTED = 10  # trials fitted before the search may stop
MIN_EACH = 3  # held and broken trials near the band before it may stop
NEAR = math.log(1.10)  # "near the band": within 10 % of [r_hold, r_half]
STEP = 0.02  # refining trials sit 2 % either side of the point they aim at
WALD_SLACK = 1.5  # profiles are computed once the delta method's widths are this near


@dataclass
class QuantileSearch:
    """The capacity search on the holding curve (ask/tell, as search.CapacitySearch):
    brackets first, then places trials at the current estimates of the rate held in
    ``hold`` of trials and of the rate held in half, 2 % either side of each in turn;
    stops once both points' intervals (a steep curve's one point's) are within the
    settings' half-width, or at its trial budget."""

    settings: SearchSettings
    hold: float = HOLD
    outcomes: list[Outcome] = field(default_factory=list)
    window: float | None = WINDOW
    step: float = STEP
    placement: str = "alternate"
    min_fitted: int = MIN_FITTED
    min_each: int = MIN_EACH
    min_wide: int = MIN_FITTED
    calibration: str = "t"
    span: float = SPAN
    reml: bool = False
    robust: bool = False
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)
    _refining: int = 0

    def tell(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def _prepared(self) -> _Prepared | None:
        if self._cache.get("prepared", (-1,))[0] != len(self.outcomes):
            fitted = near_band(self.outcomes, self.window)
            self._cache["prepared"] = (
                len(self.outcomes), _prepare(fitted, self.span, self.reml), fitted,
            )
        return self._cache["prepared"][1]

    def _fit(self, intervals: bool) -> HoldingCurve | None:
        key = "full" if intervals else "points"
        cached = self._cache.get(key)
        if cached is not None and cached[0] == len(self.outcomes):
            return cached[1]
        s = self.settings
        prepared = self._prepared()
        found = _curve(
            prepared, self._cache["prepared"][2], self.hold, s.confidence,
            (s.min_rate, s.max_rate), s.half_width, self.calibration, self.robust, intervals,
        )
        self._cache[key] = (len(self.outcomes), found)
        return found

    def curve(self) -> HoldingCurve | None:
        """The holding curve fitted to the trials near the band (None: none yet)."""
        return self._fit(intervals=True)

    def _may_stop(self, points: HoldingCurve | None) -> bool:
        """Enough trials near the band, held and broken, for its intervals to be read:
        with few trials a line through three margins can look precise by chance."""
        if points is None or points.fitted < self.min_fitted:
            return False
        if points.hold.rate is None or points.half.rate is None:
            return False
        low, high = points.hold.rate * math.exp(-NEAR), points.half.rate * math.exp(NEAR)
        near = [o for o in self.outcomes if low <= o.rate <= high]
        held = sum(o.held for o in near)
        return min(held, len(near) - held) >= self.min_each

    def done(self) -> bool:
        points = self._fit(intervals=False)
        if not self._may_stop(points):
            return False
        s = self.settings
        prepared = self._prepared()
        widths = None if prepared is None else _wald_widths(*prepared, self.hold, s.confidence)
        if widths is None or widths[0] > WALD_SLACK * math.log1p(s.half_width):
            return False
        curve = self.curve()
        if curve is None:
            return False
        if not curve.steep and curve.fitted < self.min_wide:
            return False
        points_read = (curve.hold,) if curve.steep else (curve.hold, curve.half)
        return all(
            p.relative_half_width is not None and p.relative_half_width <= s.half_width
            for p in points_read
        )

    def next_rate(self) -> float | None:
        s = self.settings
        if not self.outcomes:
            return s.start_rate
        if len(self.outcomes) >= s.max_trials:
            return None
        held = max((o.rate for o in self.outcomes if o.held), default=None)
        broken = min((o.rate for o in self.outcomes if not o.held), default=None)
        if broken is None:
            assert held is not None
            return None if held >= s.max_rate else min(s.max_rate, held * s.factor)
        if held is None:
            return None if broken <= s.min_rate else max(s.min_rate, broken / s.factor)
        if self.done():
            return None
        curve = self._fit(intervals=False)
        gap = broken / held
        if (
            gap > math.exp(2 * self.step)  # held and broken apart: the bracket first
            or curve is None or curve.fitted < 4 or curve.hold.rate is None
            or curve.half.rate is None
            or not s.min_rate <= curve.hold.rate <= s.max_rate
            or not s.min_rate <= curve.half.rate <= s.max_rate
        ):
            return self._between(held, broken)
        k = self._refining
        self._refining += 1
        if self.placement == "alternate":
            aim = (curve.hold, curve.half)[k % 2].rate
            sign = (-1, 1, 1, -1)[k % 4]
        elif self.placement == "widest":
            widths = [
                p.relative_half_width if p.relative_half_width is not None else math.inf
                for p in (curve.hold, curve.half)
            ]
            aim = (curve.hold, curve.half)[int(widths[1] > widths[0])].rate
            sign = (-1, 1)[k % 2]
        else:  # "hold": only the planning point
            aim = curve.hold.rate
            sign = (-1, 1)[k % 2]
        assert aim is not None
        rate = aim * math.exp(sign * self.step)
        return min(s.max_rate, max(s.min_rate, rate))

    def _between(self, held: float, broken: float) -> float:
        """A bracket's next trial: where the log margin, interpolated between the highest
        held and the lowest broken trial, crosses 0 (kept off the ends), or their
        geometric mean when errors broke the SLO, a margin is past the span, or noise
        inverted the two."""
        low = max((o for o in self.outcomes if o.rate == held), key=lambda o: o.margin)
        high = min((o for o in self.outcomes if o.rate == broken), key=lambda o: o.margin)
        inside = high.margin > 1 / SPAN and low.margin < SPAN
        if held >= broken or high.errors_broke or not inside:
            return math.sqrt(held * broken)
        share = math.log(low.margin) / (math.log(low.margin) - math.log(high.margin))
        share = min(0.8, max(0.2, share))
        return held * (broken / held) ** share

    def estimate(self) -> Estimate:
        """search.Estimate: the planning point (the rate held in ``hold`` of trials) and its
        interval, as the rest of servelab reads a capacity."""
        s = self.settings
        held = max((o.rate for o in self.outcomes if o.held), default=None)
        broken = min((o.rate for o in self.outcomes if not o.held), default=None)
        below_min = held is None and broken is not None and broken <= s.min_rate
        above_max = broken is None and held is not None and held >= s.max_rate
        curve = self.curve() if held is not None and broken is not None else None
        rate = interval = None
        fitted = 0
        if curve is not None:
            rate, interval, fitted = curve.hold.rate, curve.hold.interval, curve.fitted
            if rate is not None and not s.min_rate <= rate <= s.max_rate:
                rate = interval = None
        if rate is None and held is not None and broken is not None:
            rate = math.sqrt(held * broken)
        if below_min:
            rate = None
        if above_max:
            rate = held
        return Estimate(rate, interval, held, broken, below_min, above_max, fitted)
