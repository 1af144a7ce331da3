"""The censored (Tobit) likelihood behind the holding curve (``curve``): a trial's log
margin m = a - b ln rate + N(0, s^2), censored past +-ln FIT_SPAN and, for a trial broken
on errors, at m < 0; fitted in Olsen's parameters (alpha = a / s, beta = b / s, h = 1 / s),
in which the log-likelihood is concave, by Newton's method with bounds; the profile of a
linear constraint on them, and where it crosses a cut. Pure numerics (numpy, scipy)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from servelab.capacity.search import Outcome

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
    t = float(special.stdtrit(df, 0.5 + confidence / 2))  # Student t quantile
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
