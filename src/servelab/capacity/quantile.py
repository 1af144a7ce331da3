"""The capacity search on the holding curve (``curve``; its design and simulated coverage
are in that module's docstring): ask/tell, as ``search.CapacitySearch``."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servelab.capacity.curve import (
    FIT_SPAN,
    HOLD,
    HoldingCurve,
    _curve,
    _prepare,
    _Prepared,
    _wald_widths,
)
from servelab.capacity.search import MARGIN_SPAN, Estimate, Outcome, SearchSettings

MIN_FITTED = 10  # trials before the search may stop
MIN_EACH = 3  # held and broken trials near the band before it may stop
MIN_WIDE = 16  # trials before it may stop with two numbers (a band, not steep)
NEAR = math.log(1.10)  # "near the band": within 10 % of [r_hold, r_half]
STEP = 0.02  # a refining trial sits 2 % to one side of the point it aims at
WALD_SLACK = 1.5  # the profiles are computed once the delta method's widths are this near


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
