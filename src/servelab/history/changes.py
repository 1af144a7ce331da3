"""Change points in a series of per-commit figures, with a stated false-alarm rate. Pure.

The method is binary segmentation with a two-sample statistic (asv's step detection and
Otava's E-divisive look for the same thing: where the series' level moves): in a stretch
of the series, every split into a left and a right part is scored by the difference of
their means in units of its standard error, ``|mean_r - mean_l| / (sd * sqrt(1/n_l +
1/n_r))``; the best split is a change point when its score passes the threshold for that
stretch's length, and both parts are searched again.

The noise ``sd`` is the machine's own, measured from reruns of the same commit (the noise
band: ``rerun_sd``), not a fixed percentage. With the noise known, the best split's score
under no change follows one distribution for each length, whatever the machine: its
threshold is the (1 - alpha) quantile of that distribution, drawn once by simulation
(``threshold``, seeded, cached), with alpha set so that a series of n unchanged commits
raises ``false_alarms_per_100`` x n / 100 false change points on average. Figures are
compared on the log scale (a change is a ratio: -10 % reads the same at 100 and at 10,000
requests/s).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

SIMULATIONS = 4000
RECURSION_SHARE = 2.0
MIN_SEGMENT = 2  # commits on each side of a change
# False change points per 100 unchanged commits: one in 500 (Mozilla found 12.5 % of its
# alert groups false; a gate that cries wolf is muted).
DEFAULT_FALSE_ALARMS = 0.2


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first commit of the new level
    change_pct: float  # its size: the right part's level over the left's, in percent
    interval_pct: tuple[float, float]  # 95 %
    score: float
    threshold: float


def rerun_sd(reruns: Mapping[str, Sequence[float]]) -> float | None:
    """The pooled standard deviation of the log figures of commits measured more than once
    (None when no commit was)."""
    squares, dof = 0.0, 0
    for values in reruns.values():
        logs = [math.log(v) for v in values if v > 0]
        if len(logs) >= 2:
            mean = statistics.fmean(logs)
            squares += sum((x - mean) ** 2 for x in logs)
            dof += len(logs) - 1
    return math.sqrt(squares / dof) if dof else None


def _best_split(values: Sequence[float]) -> tuple[int, float]:
    """(split index, score in units of one point's sd) of the best split of ``values``."""
    n = len(values)
    total = sum(values)
    left = 0.0
    best, where = -1.0, 0
    for k in range(MIN_SEGMENT, n - MIN_SEGMENT + 1):
        left = sum(values[:k]) if k == MIN_SEGMENT else left + values[k - 1]
        mean_l, mean_r = left / k, (total - left) / (n - k)
        score = abs(mean_r - mean_l) / math.sqrt(1 / k + 1 / (n - k))
        if score > best:
            best, where = score, k
    return where, best


@functools.lru_cache(maxsize=256)
def threshold(n: int, alpha: float) -> float:
    """The score a best split of n unchanged points (unit noise) passes with probability
    ``alpha``."""
    import numpy as np

    noise = np.random.default_rng(n).standard_normal((SIMULATIONS, n))
    sums = np.cumsum(noise, axis=1)
    k = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    left = sums[:, k - 1] / k
    right = (sums[:, -1:] - sums[:, k - 1]) / (n - k)
    scores = np.abs(right - left) / np.sqrt(1 / k + 1 / (n - k))
    return float(np.quantile(scores.max(axis=1), 1 - alpha))


def change_points(
    values: Sequence[float], sd: float, false_alarms_per_100: float = DEFAULT_FALSE_ALARMS
) -> list[ChangePoint]:
    """The change points of ``values`` (one figure per commit, oldest first, positive),
    ``sd`` the noise of one figure's log (``rerun_sd``)."""
    if sd <= 0:
        raise ValueError("the noise must be positive")
    logs = [math.log(v) / sd for v in values]
    found: list[ChangePoint] = []
    _segment(logs, 0, len(logs), sd, false_alarms_per_100, found, top=True)
    found.sort(key=lambda c: c.index)
    # Each size again from the levels on either side, between its neighbours (a change
    # found first was sized against a part that held another change).
    edges = [0, *(c.index for c in found), len(logs)]
    sized = []
    for i, change in enumerate(found):
        size, interval = _size(logs[edges[i]:change.index], logs[change.index:edges[i + 2]], sd)
        sized.append(replace(change, change_pct=size, interval_pct=interval))
    return sized


def _size(
    left: Sequence[float], right: Sequence[float], sd: float
) -> tuple[float, tuple[float, float]]:
    """The change from ``left``'s level to ``right``'s in percent, and its 95 % interval."""
    step = (statistics.fmean(right) - statistics.fmean(left)) * sd
    half = 1.96 * sd * math.sqrt(1 / len(left) + 1 / len(right))
    return 100 * math.expm1(step), (100 * math.expm1(step - half), 100 * math.expm1(step + half))


def _segment(
    logs: Sequence[float], start: int, stop: int, sd: float, rate: float,
    found: list[ChangePoint], *, top: bool = False,
) -> None:
    n = stop - start
    if n < 2 * MIN_SEGMENT:
        return
    split, score = _best_split(logs[start:stop])
    # A part is searched again only after a change was found in the whole: half the
    # budget there keeps the whole's false alarms near the rate asked (measured:
    # tests/unit/history/test_changes.py).
    alpha = min(0.5, rate * n / 100 / (1 if top else RECURSION_SHARE))
    limit = threshold(n, alpha)
    if score <= limit:
        return
    at = start + split
    change, interval = _size(logs[start:at], logs[at:stop], sd)
    found.append(ChangePoint(at, change, interval, score, limit))
    _segment(logs, start, at, sd, rate, found)
    _segment(logs, at, stop, sd, rate, found)
