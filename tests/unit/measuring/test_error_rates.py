"""Error rates of the whole measuring rule at the moment it stops, on simulated studies
with a known truth: the real Runner, stopping rule, nested comparisons and Holm's
family-wise judgement, driven by a FakeExecutor whose stacks have a start-to-start
spread, a slice spread and a machine drifting from moment to moment.

The simulated study is shaped like ``servelab study quick``: a baseline and two
variants side by side or in turns, four workloads (8 comparisons), ±5 % precision, a budget of
about five rounds. Figures for more studies: benchmarks/error_rates.py."""

from __future__ import annotations

import math
import random

import pytest
from support import simulated_study

STUDIES = 100
# The spread the issue measured on this machine: 3 % start to start, 5 % slice to slice.
SD_START, SD_SLICE, DRIFT = 0.03, 0.05, 0.08


def rates(effects: dict[str, float], seed: int, side_by_side: bool = True):
    rng = random.Random(seed)
    covered = compared = false_studies = raw_false_studies = 0
    for _ in range(STUDIES):
        found = simulated_study(
            rng, effects, sd_start=SD_START, sd_slice=SD_SLICE, drift=DRIFT,
            side_by_side=side_by_side,
        )
        false_here = raw_here = False
        for variant, comparison in found:
            truth = 100 * math.expm1(effects.get(variant, 0.0))
            low, high = comparison.interval_pct
            compared += 1
            covered += low <= truth <= high
            if effects.get(variant, 0.0) == 0.0:
                false_here |= comparison.verdict in ("better", "worse")
                raw_here |= comparison.p_value is not None and comparison.p_value < 0.05
        false_studies += false_here
        raw_false_studies += raw_here
    return covered / compared, false_studies / STUDIES, raw_false_studies / STUDIES


@pytest.mark.parametrize("side_by_side", [True, False], ids=["side-by-side", "in-turns"])
def test_identical_stacks_keep_the_family_wise_rate_and_the_coverage(side_by_side):
    # In turns every slice meets the machine at its own moment (8 % drift): noisier
    # slices, fewer rounds in the budget; the rates must hold all the same.
    coverage, family_wise, unadjusted = rates({}, seed=11, side_by_side=side_by_side)
    assert 0.92 <= coverage <= 0.98  # each 95 % interval, at the moment measuring stopped
    assert family_wise <= 0.08  # at most 5 % of studies call any difference (binomial noise)
    # The test can fail: the same studies judged one comparison at a time call a
    # difference far more often (the issue measured 30-45 % with the old rule).
    assert unadjusted >= 0.15


def test_a_real_difference_is_covered_and_found():
    effects = {"keepalive": math.log(1.10)}  # +10 %; "unix" identical to the baseline
    coverage, family_wise, _ = rates(effects, seed=12)
    assert 0.92 <= coverage <= 0.98
    assert family_wise <= 0.08  # the identical variant is still rarely called different
    # Holm over 8 comparisons at this noise (3 % start spread) costs power: +10 % is
    # found in about a quarter of the comparisons within the budget, +25 % in nearly all.
    rng = random.Random(13)
    large = {"keepalive": math.log(1.25)}
    verdicts = [
        c.verdict
        for _ in range(10)
        for variant, c in simulated_study(
            rng, large, sd_start=SD_START, sd_slice=SD_SLICE, drift=DRIFT
        )
        if variant == "keepalive"
    ]
    assert verdicts.count("better") >= 0.9 * len(verdicts)
    assert "worse" not in verdicts
