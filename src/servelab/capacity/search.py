"""The capacity search: the largest arrival rate that keeps an SLO, with an interval,
from noisy fixed-rate trials. Pure: it proposes rates and is told outcomes (ask/tell, as
optuna's samplers are), so simulated systems test it without a server.

Why this design (docs/capacity-estimand.md; the figures in docs/validation/capacity.md):

- Each trial gives a *margin*, the SLO's limit over the measured latency (above 1 held,
  below 1 broken), not only pass/fail: RFC 9971's MLRsearch and Waeber et al.'s
  probabilistic bisection learn from one bit a trial, which on this project's VM (a 1 s
  window varies ~9 %) costs many trials near the boundary.
- Near saturation a queue's waiting time grows as 1 / (capacity - rate) (Kingman's
  heavy-traffic formula; p99 of M/M/1 is ln(100) / (mu - lambda) exactly), so the margin
  falls steadily with the rate there, and its logarithm is read with a symmetric noise
  (a trial's p99 is off by a factor, not by milliseconds). The search fits a line to the
  log margins of the trials near the bracket (chosen by their rate, within WINDOW of its
  centre, never by their margin: choosing by the response biases a least-squares fit),
  each clipped to MARGIN_SPAN (far past saturation a queue's latency is the trial's
  length), and the capacity is where the line crosses 0. The interval is Fieller's for
  that ratio of estimates: unbounded (no answer yet) while the slope is not told from
  the noise; it carries the noise the trials showed, the machine's drift between them
  included.
- It brackets first (doubling up from the start rate, halving down if that already
  broke the SLO), then places trials on both sides of the crossing, a few per cent
  away, where a line's intercept and slope are both learnt; it stops when the interval's
  half-width is within the target, or at its trial budget.
- A trial that broke the error bound is no point on the line (its latency is of the
  requests that did get answers): it bounds the capacity from above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

MARGIN_SPAN = 4.0  # margins are clipped to [1/4, 4]: past that a trial says "far"
MIN_FIT_TRIALS = 4
MIN_LINE_TRIALS = 5
MIN_EACH_SIDE = 2  # an interval needs two trials on the line on either side of the SLO
STEP_MIN = 0.02  # a refining trial sits 2-10 % of the estimate from it
STEP_MAX = 0.10
WINDOW = math.log(1.25)  # trials within 25 % of the bracket's centre are fitted
STEP_FLOOR = 0.005  # closer than this a trial tells the sides apart no better than noise


@dataclass(frozen=True)
class SearchSettings:
    start_rate: float
    max_rate: float
    min_rate: float = 1.0
    factor: float = 2.0  # bracketing steps
    half_width: float = 0.05  # stop once the interval is within +-5 % of the capacity
    max_trials: int = 24
    confidence: float = 0.90

    def __post_init__(self) -> None:
        if not 0 < self.min_rate <= self.start_rate <= self.max_rate:
            raise ValueError("need 0 < min_rate <= start_rate <= max_rate")
        if not self.factor > 1 or not 0 < self.half_width < 1 or not 0 < self.confidence < 1:
            raise ValueError("need factor > 1, 0 < half_width < 1, 0 < confidence < 1")


@dataclass(frozen=True)
class Outcome:
    """What one trusted trial says about the SLO: the rate it held, its margin (limit over
    the measured latency, the tightest bound), and whether too many requests failed."""

    rate: float
    margin: float
    errors_broke: bool = False

    @property
    def held(self) -> bool:
        return not self.errors_broke and self.margin >= 1.0


@dataclass(frozen=True)
class Estimate:
    """The capacity so far. ``interval`` None: not known to the confidence yet (too few
    trials on the line, or a slope not told from the noise)."""

    rate: float | None
    interval: tuple[float, float] | None
    highest_held: float | None
    lowest_broken: float | None
    below_min: bool = False  # the SLO broke at the lowest rate allowed
    above_max: bool = False  # held at the highest rate allowed
    fitted: int = 0  # trials on the line

    @property
    def relative_half_width(self) -> float | None:
        if self.interval is None or not self.rate:
            return None
        return (self.interval[1] - self.interval[0]) / 2 / self.rate


class Search(Protocol):
    """What places trials (ask/tell): this module's search, or the ramps it is compared
    with (benchmarks/capacity.py)."""

    def next_rate(self) -> float | None: ...

    def tell(self, outcome: Outcome) -> None: ...

    def estimate(self) -> Estimate: ...


@dataclass
class CapacitySearch:
    settings: SearchSettings
    outcomes: list[Outcome] = field(default_factory=list)

    def tell(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def next_rate(self) -> float | None:
        """The rate of the next trial, or None when the search is over."""
        s = self.settings
        if not self.outcomes:
            return s.start_rate
        if len(self.outcomes) >= s.max_trials:
            return None
        estimate = self.estimate()
        if estimate.below_min or estimate.above_max:
            return None
        held, broken = estimate.highest_held, estimate.lowest_broken
        if broken is None:  # still bracketing upwards
            assert held is not None
            return min(s.max_rate, held * s.factor)
        if held is None:  # broke from the start: downwards
            return max(s.min_rate, broken / s.factor)
        width = estimate.relative_half_width
        if width is not None and width <= s.half_width:
            return None
        if estimate.fitted < MIN_FIT_TRIALS or estimate.rate is None:
            return self._between(held, broken)
        line = self._on_line()
        above = sum(o.rate > estimate.rate for o in line)
        upwards = above <= len(line) - above  # the side with fewer trials on the line
        step = min(STEP_MAX, max(STEP_MIN, (width or STEP_MAX) / 2))
        # Nearer than any trial that fell off the line on that side: near saturation the
        # latency turns steeply (a few per cent of the rate on this project's stacks), and
        # a trial past the turn says only "too much".
        off = [
            abs(o.rate / estimate.rate - 1) for o in self.outcomes
            if self._off_line(o) and (o.rate > estimate.rate) == upwards
        ]
        if off:
            step = min(step, min(off) / 2)
        step = max(step, STEP_FLOOR)
        rate = estimate.rate * (1 + step if upwards else 1 - step)
        return min(s.max_rate, max(s.min_rate, rate))

    def _between(self, held: float, broken: float) -> float:
        """A bracket's next trial: where the margin, interpolated between the highest held
        and the lowest broken trial, crosses 1 (kept off the ends), or their geometric mean
        when errors (no margin) broke the SLO or the two are inverted by noise."""
        low = max((o for o in self.outcomes if o.rate == held), key=lambda o: o.margin)
        high = min((o for o in self.outcomes if o.rate == broken), key=lambda o: o.margin)
        on_line = high.margin >= 1 / MARGIN_SPAN and low.margin <= MARGIN_SPAN
        if held >= broken or high.errors_broke or not on_line:
            # Far past saturation a queue's latency is the trial's length, no point on the
            # line: halving the bracket (in ratio) is all a trial there teaches.
            return math.sqrt(held * broken)
        share = (low.margin - 1) / (low.margin - high.margin)
        share = min(0.8, max(0.2, share))
        return held + share * (broken - held)

    def _on_line(self) -> list[Outcome]:
        """The trials the line is fitted to: chosen by their rate (near the crossing),
        never by their margin (choosing by the response biases a least-squares fit); a
        margin past MARGIN_SPAN either way is clipped to it."""
        capped = min((o.rate for o in self.outcomes if o.errors_broke), default=math.inf)
        usable = [o for o in self.outcomes if not o.errors_broke and o.rate < capped]
        held = [o.rate for o in usable if o.margin >= 1]
        broken = [o.rate for o in usable if o.margin < 1]
        if not held or not broken:
            return []
        centre = math.sqrt(max(held) * min(broken))
        return [o for o in usable if abs(math.log(o.rate / centre)) <= WINDOW]

    def _off_line(self, outcome: Outcome) -> bool:
        return not 1 / MARGIN_SPAN <= outcome.margin <= MARGIN_SPAN

    def estimate(self) -> Estimate:
        s = self.settings
        held = max((o.rate for o in self.outcomes if o.held), default=None)
        broken = min((o.rate for o in self.outcomes if not o.held), default=None)
        below_min = held is None and broken is not None and broken <= s.min_rate
        above_max = broken is None and held is not None and held >= s.max_rate
        line = self._on_line()
        rate = interval = None
        held_on_line = sum(o.margin >= 1 for o in line)
        if (
            min(held_on_line, len(line) - held_on_line) >= MIN_EACH_SIDE
            and len(line) >= MIN_LINE_TRIALS
        ):
            rates = [o.rate for o in line]
            rate, interval = crossing(
                rates, [clipped_log(o.margin) for o in line], s.confidence, level=0.0,
            )
            # A crossing outside the trials it is fitted to is an extrapolation (a slow
            # moment of the machine broke one trial among held ones): no estimate, so the
            # next trials go where held and broken disagree, not out to it.
            if rate is not None and not min(rates) <= rate <= max(rates):
                rate = interval = None
            capped = min((o.rate for o in self.outcomes if o.errors_broke), default=None)
            if capped is not None and interval is not None:
                interval = (min(interval[0], capped), min(interval[1], capped))
            # Fieller's interval near its unbounded case reaches past the rates searched
            # (below zero, once, on the FastAPI stack here): the trials do not bound it.
            if interval is not None and not (
                s.min_rate <= interval[0] and interval[1] <= s.max_rate
            ):
                interval = None
        if rate is None and held is not None and broken is not None:
            rate = math.sqrt(held * broken) if held < broken else (held + broken) / 2
        if below_min:
            rate = None
        if above_max:
            rate = held
        return Estimate(rate, interval, held, broken, below_min, above_max, len(line))


@dataclass(frozen=True)
class Mixed:
    """Where the trials disagree: from the lowest rate that broke the SLO to the highest
    that held, how many of the trials in that band held. On a stack whose starts either
    hold easily or collapse at one rate (the seed's FastAPI stack here,
    docs/validation/capacity.md), the band is wide and its share is the honest answer
    there: the chance that a start holds such a rate."""

    low: float
    high: float
    held: int
    trials: int

    def share_interval(self, confidence: float) -> tuple[float, float]:
        """Wilson's interval for the share held (scipy's binomtest)."""
        from scipy import stats

        found = stats.binomtest(self.held, self.trials).proportion_ci(confidence, method="wilson")
        return float(found.low), float(found.high)


def mixed_band(outcomes: Sequence[Outcome]) -> Mixed | None:
    """The band where held and broken trials overlap (None: every trial that held is below
    every one that broke; one rate that both held and broke is a band of that rate)."""
    held = [o.rate for o in outcomes if o.held]
    broken = [o.rate for o in outcomes if not o.held]
    if not held or not broken or min(broken) > max(held):
        return None
    low, high = min(broken), max(held)
    inside = [o for o in outcomes if low <= o.rate <= high]
    return Mixed(low, high, sum(o.held for o in inside), len(inside))


def clipped_log(margin: float) -> float:
    bound = math.log(MARGIN_SPAN)
    return max(-bound, min(bound, math.log(margin))) if margin > 0 else -bound


def crossing(
    rates: Sequence[float], margins: Sequence[float], confidence: float, level: float = 1.0
) -> tuple[float | None, tuple[float, float] | None]:
    """Where the least-squares line of ``margins`` on ``rates`` crosses ``level``, and Fieller's
    interval for it at ``confidence`` (None when the slope is not negative beyond the
    noise: the interval would be unbounded)."""
    from servelab.analysis.stats import t_quantile

    n = len(rates)
    mean_x = sum(rates) / n
    mean_y = sum(margins) / n
    sxx = sum((x - mean_x) ** 2 for x in rates)
    if n < 3 or sxx <= 0:
        return None, None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(rates, margins, strict=True)) / sxx
    if slope >= 0:
        return None, None
    intercept = mean_y - slope * mean_x
    root = (level - intercept) / slope
    residual = sum(
        (y - intercept - slope * x) ** 2 for x, y in zip(rates, margins, strict=True)
    ) / (n - 2)
    t = t_quantile(0.5 + confidence / 2, n - 2)
    # Fieller: the x where |a - 1 + b x| <= t * se(a + b x), with the line centred at mean_x
    # (so the intercept and slope estimates are uncorrelated): var(ybar) = s2 / n,
    # var(b) = s2 / sxx; solve (ybar - 1 + b u)^2 = t^2 s2 (1/n + u^2/sxx), u = x - mean_x.
    g = t * t * residual / (slope * slope * sxx)
    if g >= 1:
        return root, None
    u0 = (level - mean_y) / slope  # the root, centred
    spread = (t / abs(slope)) * math.sqrt(residual * ((1 - g) / n + u0 * u0 / sxx))
    low = mean_x + (u0 - spread) / (1 - g)
    high = mean_x + (u0 + spread) / (1 - g)
    return root, (min(low, high), max(low, high))
