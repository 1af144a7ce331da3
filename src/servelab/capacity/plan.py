"""What a capacity search is asked (``CapacityPlan``: the SLO, the rates allowed, the
trials) and what it answers for a variant (``VariantCapacity``): the values the search's
measuring (``run``), its files (``files``), words (``answer``) and comparison
(``compare``) share, below all of them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from servelab.capacity.curve import HoldingCurve, SharePoint
from servelab.capacity.machine import MAX_WAIT_S
from servelab.capacity.search import Estimate, Mixed, SearchSettings
from servelab.capacity.slo import Slo
from servelab.capacity.trials import Trial
from servelab.config.load import LoadSpec
from servelab.errors import SpecError
from servelab.traffic.schedule import ScheduleSize

MAX_TRIAL_S = 60.0
MAX_SPEED = 32.0  # a replay's search: from 1/32 to 32 times the log's traffic
# A replay trial lasts the log's length over its speed: a shorter one is a blast that a
# stack which cannot keep the rate still survives (its queues have no time to grow). The
# search goes no faster than the log allows: there it runs out of log, and says so.
MIN_REPLAY_TRIAL_S = 2.0
MAX_MACHINE_WAIT_S = 600.0  # a start waiting longer is a machine to measure elsewhere
DEFAULT_BUDGET_S = 300.0  # the command's: a search answers within 5 minutes a variant
# A shorter budget fits no search: a start, its warm-up and a handful of trials.
MIN_BUDGET_S = 60.0


def log_speed_limit(duration_s: float) -> float:
    """The highest speed at which a log ``duration_s`` long (at speed 1) still gives a
    trial of MIN_REPLAY_TRIAL_S."""
    return duration_s / MIN_REPLAY_TRIAL_S


@dataclass(frozen=True)
class CapacityPlan:
    """How to search: the rates allowed (None: from the throughput probe), the trials."""

    slo: Slo
    start_rate: float | None = None
    max_rate: float | None = None
    min_rate: float = 1.0
    trial_s: float = 5.0
    half_width: float = 0.05
    max_trials: int = 24  # a wide band takes them all: about 4 minutes of 5 s trials
    confidence: float = 0.90
    connections: int = 1000
    timeout_s: float = 10.0
    fresh_starts: bool = True  # each trial after the first on a fresh start of its stack
    # The planning figure: the rate held in this share of trials (--hold), with the rate
    # held in half of them beside it (servelab.capacity.curve).
    hold: float = 0.9
    machine_wait_s: float = MAX_WAIT_S  # a start waits while the machine runs slow
    # Wall time each variant's search may take, its starts' waits for the machine's speed
    # included: no trial starts that would end past it (None: until the search is over;
    # the command's default is DEFAULT_BUDGET_S).
    budget_s: float | None = None

    def check(self) -> None:
        """SpecError (one line, with the fix) for a plan that cannot run; before anything
        starts."""
        for label, value in (("--start", self.start_rate), ("--max-rate", self.max_rate)):
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise SpecError(
                    f"{label} must be a positive rate, got {value:g}", f"e.g. {label} 100"
                )
        if not (self.min_rate > 0 and math.isfinite(self.min_rate)):
            raise SpecError(
                f"--min-rate must be positive, got {self.min_rate:g}", "e.g. --min-rate 1"
            )
        low = self.start_rate if self.start_rate is not None else self.min_rate
        if self.max_rate is not None and self.max_rate < max(low, self.min_rate):
            raise SpecError(
                f"the rate range is empty: --max-rate {self.max_rate:g} is below "
                f"{max(low, self.min_rate):g}",
                "raise --max-rate, or lower --start / --min-rate",
            )
        if not (0 <= self.machine_wait_s <= MAX_MACHINE_WAIT_S):
            raise SpecError(
                f"--machine-wait must be in [0, {MAX_MACHINE_WAIT_S:g}] seconds, got "
                f"{self.machine_wait_s:g}", "e.g. --machine-wait 60 (0: never wait)",
            )
        if self.budget_s is not None and not self.budget_s >= MIN_BUDGET_S:
            raise SpecError(
                f"--budget {self.budget_s:g}s is too short for a capacity search (a start, "
                "its warm-up and a few trials)",
                f"give --budget {MIN_BUDGET_S:g}s or more, e.g. --budget 5m",
            )
        if not 0 < self.trial_s <= MAX_TRIAL_S:
            raise SpecError(
                f"--trial-seconds must be in (0, {MAX_TRIAL_S:g}], got {self.trial_s:g}",
                "e.g. --trial-seconds 5",
            )
        if not 0 < self.half_width < 0.5:
            raise SpecError(
                f"--half-width must be between 0 and 50 %, got {100 * self.half_width:g} %",
                "e.g. --half-width 5",
            )
        if not 3 <= self.max_trials <= 200:
            raise SpecError(f"--max-trials must be 3 to 200, got {self.max_trials}", "e.g. 20")
        if not 0.5 <= self.confidence < 1:
            raise SpecError(
                f"--confidence must be in [0.5, 1), got {self.confidence:g}", "e.g. 0.9"
            )
        if not 0.5 < self.hold < 1:
            raise SpecError(
                f"--hold must be a share of trials between 0.5 and 1, got {self.hold:g}",
                "e.g. --hold 0.9 (the rate held in 9 trials of 10)",
            )
        if self.connections < 1 or not self.timeout_s > 0:
            raise SpecError("--connections and --timeout must be positive", "e.g. 1000 and 10")

    def settings(self, probed_rps: float | None) -> SearchSettings:
        """The search's rates: the user's, else half the probed throughput to start and
        twice it at most (a stack holds no more than it serves flat out, give or take the
        machine's drift)."""
        guess = probed_rps if probed_rps and probed_rps > 0 else 100.0
        start = self.start_rate or max(self.min_rate, guess / 2)
        high = self.max_rate or max(start, 2 * guess)
        return SearchSettings(
            start_rate=min(start, high), max_rate=high, min_rate=min(self.min_rate, start),
            # From half the probed throughput, 1.5x steps reach past it in two trials
            # without trials far past saturation (whose queues take long to drain).
            factor=1.5 if probed_rps and not self.start_rate else 2.0,
            half_width=self.half_width, max_trials=self.max_trials,
            confidence=self.confidence,
        )

    def replay_settings(self, duration_s: float | None = None) -> SearchSettings:
        """A replay's search is over the speed, the log's traffic times a factor: from 1x
        (or --start), doubling or halving, between 1/MAX_SPEED and MAX_SPEED (or
        --max-rate), and no faster than a trial of MIN_REPLAY_TRIAL_S of the log
        (``duration_s`` long at speed 1) allows. SpecError for a log too short for any."""
        start = self.start_rate or 1.0
        high = self.max_rate or max(start, MAX_SPEED)
        if duration_s is not None:
            high = min(high, log_speed_limit(duration_s))
            if high < 1 / MAX_SPEED:
                raise SpecError(
                    f"the replayed log lasts {duration_s:g} s: too short for a trial of "
                    f"{MIN_REPLAY_TRIAL_S:g} s even at 1/{MAX_SPEED:g} of its speed",
                    "replay a longer log or window (--window)",
                )
        return SearchSettings(
            start_rate=min(start, high), max_rate=high, min_rate=min(start, 1 / MAX_SPEED),
            factor=2.0, half_width=self.half_width, max_trials=self.max_trials,
            confidence=self.confidence,
        )

    def replay_load(self, schedule: LoadSpec, speed: float, duration_s: float) -> LoadSpec:
        """A replay trial's load: ``schedule`` (the log's, ``duration_s`` long at speed 1)
        at ``speed``, bounded by its own length and the trial's timeout."""
        return schedule.model_copy(update={
            "speed": speed, "concurrency": self.connections, "timeout_s": self.timeout_s,
            "max_time_s": duration_s / speed + self.timeout_s + 30.0,
        })

    def load(self, rate: float, counted: bool = True) -> LoadSpec:
        """A trial's load: ``rate`` for the trial's length, as a request count (oha), or
        as a duration for a driver that counts none (``counted`` False: Locust)."""
        if not counted:
            return LoadSpec(
                model="open", rate=rate, duration_s=self.trial_s,
                concurrency=self.connections, timeout_s=self.timeout_s,
                max_time_s=self.trial_s + self.timeout_s + 10.0,
            )
        requests = max(2, math.ceil(rate * self.trial_s))
        return LoadSpec(
            model="open", rate=rate, requests=requests, concurrency=self.connections,
            timeout_s=self.timeout_s, max_time_s=requests / rate + self.timeout_s + 10.0,
        )


@dataclass(frozen=True)
class VariantCapacity:
    variant: str
    estimate: Estimate
    trials: tuple[Trial, ...]
    probed_rps: float | None
    stopped_because: str | None = None  # the driver could not be trusted
    first_errors_rate: float | None = None  # the lowest rate at which a request failed
    mixed: Mixed | None = None  # where held and broken trials overlap
    # A replayed log's search: its rates are speeds, times this traffic (None: req/s).
    traffic: ScheduleSize | None = None
    # The holding curve fitted to the trials (None: not fitted, or a search without one).
    curve: HoldingCurve | None = None
    # The rate at which the load driver ran out of CPU, below which the search went on
    # (None: it never did).
    sender_limit: float | None = None
    # The budget, when the search ended because it was spent (None: it ended by itself).
    budget_spent_s: float | None = None
    seconds: float | None = None  # the search's wall time, its waits included

    def to_dict(self) -> dict[str, Any]:
        e = self.estimate
        return {
            "variant": self.variant,
            "capacity_rps": e.rate,
            "interval_rps": list(e.interval) if e.interval else None,
            "highest_held_rps": e.highest_held,
            "lowest_broken_rps": e.lowest_broken,
            "below_min_rate": e.below_min,
            "above_max_rate": e.above_max,
            "trials_on_the_line": e.fitted,
            "trials": len(self.trials),
            "starts": len({t.start for t in self.trials}),
            "probed_rps": self.probed_rps,
            "first_errors_rps": self.first_errors_rate,
            "stopped_because": self.stopped_because,
            "sender_limit": self.sender_limit,
            "budget_spent_s": self.budget_spent_s,
            "seconds": self.seconds,
            "unit": "req/s" if self.traffic is None else "times the log's traffic",
            "log_traffic": None if self.traffic is None else {
                "requests": self.traffic.requests, "duration_s": self.traffic.duration_s,
                "mean_rps": self.traffic.mean_rate, "peak_second_rps": self.traffic.peak_second,
            },
            "holding_curve": None if self.curve is None else curve_document(self.curve),
            "mixed": None if self.mixed is None else {
                "low_rps": self.mixed.low, "high_rps": self.mixed.high,
                "held": self.mixed.held, "trials": self.mixed.trials,
            },
        }


def curve_document(curve: HoldingCurve) -> dict[str, Any]:
    """The holding curve for capacity.json: its two points with their intervals, the band
    between them, whether it is a sharp edge, and its parameters (P(hold | rate) =
    Phi((a - b ln rate) / s))."""
    def point(p: SharePoint) -> dict[str, Any]:
        return {"share": p.share, "rate": p.rate,
                "interval": list(p.interval) if p.interval else None}

    return {
        "hold": point(curve.hold), "half": point(curve.half),
        "band_ratio": curve.ratio,
        "band_interval": list(curve.band) if curve.band else None,
        "steep": curve.steep, "trials_fitted": curve.fitted,
        "a": curve.a, "b": curve.b, "s": curve.s, "confidence": curve.confidence,
    }
