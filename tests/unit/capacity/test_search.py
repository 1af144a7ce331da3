"""The capacity search on simulated stacks whose capacity is known: how often its interval
holds the truth, how wide it is, how many trials it takes; a stack doomed at the first
rate, one that holds every rate, errors before latency, noise that inverts the bracket."""

from __future__ import annotations

import math
import statistics

import pytest

from servelab.capacity.search import (
    CapacitySearch,
    Mixed,
    Outcome,
    SearchSettings,
    crossing,
    mixed_band,
)
from servelab.capacity.simulated import SimulatedStack, simulate

LIMIT_MS = 100.0
SEARCHES = 200


def _searches(stack: SimulatedStack, settings: SearchSettings) -> tuple[float, float, float]:
    """Coverage of the truth, median relative half-width, median trials over SEARCHES."""
    truth = stack.capacity(LIMIT_MS)
    covered, widths, trials = 0, [], []
    for seed in range(SEARCHES):
        estimate, n = simulate(stack, LIMIT_MS, settings, seed)
        trials.append(n)
        if estimate.interval is not None:
            covered += estimate.interval[0] <= truth <= estimate.interval[1]
            widths.append(estimate.relative_half_width)
        # no interval: counted as not covering (the user got no answer)
    return covered / SEARCHES, statistics.median(widths), statistics.median(trials)


# (scale, noise, drift, least coverage): a soft knee (the capacity 21 % below saturation)
# and a sharp one (4 %, as the sleepy app's stack on this VM); the p99 read with a 5-20 %
# noise, the machine's speed drifting 3-5 % between trials. Measured over 400 searches
# (benchmarks/capacity.py simulate): 0.87, 0.93, 0.90, 0.84, 0.95, 0.84, 0.81; the
# nominal 90 % is not held under drift (the fit reads the mean log margin, the truth is
# the median capacity). The floors below are those, less the sampling error of 200.
CASES = [
    (20_000.0, 0.05, 0.0, 0.80), (20_000.0, 0.10, 0.0, 0.87), (20_000.0, 0.20, 0.0, 0.85),
    (20_000.0, 0.10, 0.05, 0.78), (4_000.0, 0.10, 0.0, 0.90), (4_000.0, 0.10, 0.03, 0.78),
    (4_000.0, 0.20, 0.05, 0.75),
]


@pytest.mark.parametrize(("scale", "noise", "drift", "least"), CASES)
def test_the_interval_holds_the_capacity_of_a_noisy_queue(
    scale: float, noise: float, drift: float, least: float
) -> None:
    """Its nominal 90 % interval holds the capacity in most of 200 searches, at most +-5 %
    wide in the median, in 12 trials at most in the median (20 at most in all)."""
    stack = SimulatedStack(scale_ms_per_s=scale, noise=noise, drift=drift)
    settings = SearchSettings(start_rate=450, max_rate=1800, factor=1.5, max_trials=20)
    coverage, width, trials = _searches(stack, settings)
    assert coverage >= least, coverage
    assert width <= 0.05, width
    assert trials <= 12, trials


def test_more_noise_costs_more_trials() -> None:
    settings = SearchSettings(start_rate=400, max_rate=2000, max_trials=40)
    quiet = _searches(SimulatedStack(noise=0.05), settings)[2]
    noisy = _searches(SimulatedStack(noise=0.20), settings)[2]
    assert noisy > quiet


def test_a_stack_doomed_at_the_first_rate_is_below_the_lowest_rate() -> None:
    stack = SimulatedStack(saturation=3.0, base_ms=50)  # even 1 req/s is near saturation
    settings = SearchSettings(start_rate=100, max_rate=1000, min_rate=5)
    estimate, trials = simulate(stack, LIMIT_MS, settings, seed=1)
    assert estimate.below_min and estimate.rate is None and estimate.interval is None
    assert estimate.highest_held is None and estimate.lowest_broken == 5
    assert trials == 6  # 100, 50, 25, 12.5, 6.25, 5


def test_a_stack_that_holds_every_rate_says_so() -> None:
    settings = SearchSettings(start_rate=10, max_rate=100)
    estimate, trials = simulate(SimulatedStack(saturation=10_000), LIMIT_MS, settings, seed=2)
    assert estimate.above_max and estimate.rate == 100 and estimate.interval is None
    assert trials == 5  # 10, 20, 40, 80, 100


def test_errors_bound_the_capacity_from_above() -> None:
    """A stack that fails requests (502s from a full backlog) before its latency breaks the
    SLO: the failing rates are no points on the line, and cap the interval."""
    search = CapacitySearch(SearchSettings(start_rate=100, max_rate=1000))
    for rate, margin in [(100, 3.0), (150, 2.5), (200, 2.0), (250, 1.5)]:
        search.tell(Outcome(rate, margin))
    search.tell(Outcome(260, 1.4, errors_broke=True))
    search.tell(Outcome(300, 0.9))  # noise: a higher rate, later, without errors
    estimate = search.estimate()
    assert estimate.lowest_broken == 260
    assert estimate.rate is not None
    assert estimate.interval is None or estimate.interval[1] <= 260


def test_the_bracket_is_halved_where_trials_are_far_past_saturation() -> None:
    """A broken trial whose latency is the trial's length says only "too much": the next
    trial halves the bracket (in ratio) instead of trusting a line through it."""
    search = CapacitySearch(SearchSettings(start_rate=100, max_rate=1000))
    search.tell(Outcome(100, 3.9))
    search.tell(Outcome(200, 0.02))
    assert search.next_rate() == pytest.approx((100 * 200) ** 0.5)
    search = CapacitySearch(SearchSettings(start_rate=100, max_rate=1000))
    search.tell(Outcome(100, 2.0))
    search.tell(Outcome(200, 0.5))  # both on the line: interpolated where it crosses 1
    assert search.next_rate() == pytest.approx(100 + 100 * (2 - 1) / (2 - 0.5))


def test_fieller_interval_of_an_exact_line_is_the_root() -> None:
    rates = [100.0, 110.0, 120.0, 130.0]
    margins = [2 - (r - 100) / 20 for r in rates]  # crosses 1 at 120
    root, interval = crossing(rates, margins, 0.9)
    assert root == pytest.approx(120)
    assert interval is not None and interval == pytest.approx((120, 120))
    assert crossing(rates, [1.0, 1.2, 0.8, 1.1], 0.9)[1] is None  # no slope beyond noise
    assert crossing(rates, [0.5, 0.6, 0.7, 0.8], 0.9) == (None, None)  # rising: no root


def test_an_interval_past_the_rates_searched_is_no_interval() -> None:
    """Fieller's interval near its unbounded case (a slope barely told from the noise)
    reaches past the rates searched, once below zero on a real stack: no answer yet."""
    search = CapacitySearch(SearchSettings(start_rate=500, max_rate=620, min_rate=480))
    margins = [(500, 1.6), (520, 0.891), (540, 1.274), (560, 0.825), (580, 1.009), (600, 0.666)]
    for rate, margin in margins:
        search.tell(Outcome(rate, margin))
    rates = [r for r, _ in margins]
    _, wide = crossing(rates, [math.log(m) for _, m in margins], 0.9, level=0.0)
    assert wide is not None and wide[0] < 480 and wide[1] > 620  # past the rates searched
    estimate = search.estimate()
    assert estimate.interval is None and estimate.rate is not None
    assert search.next_rate() is not None  # so the search goes on


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        SearchSettings(start_rate=10, max_rate=5)
    with pytest.raises(ValueError):
        SearchSettings(start_rate=10, max_rate=50, factor=1.0)


def test_a_crossing_outside_the_trials_it_is_fitted_to_does_not_lead_the_search() -> None:
    """The unix stack of quick's seed (this VM, SLO p99 < 100 ms): held at 440 and 470
    req/s (p99 80 and 83 ms) but broke at 407 (376 ms), a slow moment of the machine. The
    line through the trials near 437 then crossed 1 at 297, below every one of them, and
    the search, led there, measured 282-296 req/s eleven times (all held, none on the
    line) until its trials ran out. An extrapolated crossing is no estimate: the next
    trials go where held and broken disagree."""
    search = CapacitySearch(SearchSettings(start_rate=177, max_rate=708, factor=1.5))
    for rate, p99 in ((176.9, 11.8), (265.4, 27.3), (398.1, 92.9), (597.2, 759.4),
                      (487.6, 1621.6), (440.6, 80.3), (463.5, 168.8), (469.8, 82.6),
                      (407.3, 375.5)):
        search.tell(Outcome(rate, 100.0 / p99))
    asked = []
    for _ in range(3):
        rate = search.next_rate()
        assert rate is not None
        asked.append(rate)
        search.tell(Outcome(rate, 100.0 / (90.0 if rate < 450 else 130.0)))
    assert all(380 <= rate <= 500 for rate in asked), asked
    estimate = search.estimate()
    assert estimate.rate is None or 398.1 <= estimate.rate <= 487.6


def test_the_band_where_held_and_broken_overlap_and_the_share_held_there() -> None:
    """As one FastAPI search here (docs/capacity.md): held at 1,462 while 1,405 broke."""
    trials = [
        Outcome(1148, 3.7), Outcome(1405, 0.15), Outcome(1419, 0.26), Outcome(1426, 0.6),
        Outcome(1440, 1.2), Outcome(1441, 4.2), Outcome(1441, 0.16), Outcome(1462, 4.0),
        Outcome(1470, 0.5, errors_broke=True), Outcome(1800, 0.2),
    ]
    band = mixed_band(trials)
    assert band == Mixed(1405, 1462, held=3, trials=7)
    low, high = band.share_interval(0.90)
    assert 0.15 < low < 3 / 7 < high < 0.8
    # Wider at a higher confidence, and narrower with more trials at the same share.
    assert band.share_interval(0.99)[0] < low
    more = Mixed(1405, 1462, held=30, trials=70).share_interval(0.90)
    assert low < more[0] and more[1] < high


def test_no_band_where_every_held_trial_is_below_every_broken_one() -> None:
    assert mixed_band([Outcome(100, 2.0), Outcome(150, 1.1), Outcome(160, 0.9)]) is None
    assert mixed_band([Outcome(100, 2.0)]) is None
    assert mixed_band([Outcome(100, 0.5), Outcome(90, 0.4)]) is None
    # A tie at one rate (held once, broken once) is a band of one rate.
    assert mixed_band([Outcome(100, 1.5), Outcome(100, 0.5)]) == Mixed(100, 100, 1, 2)

