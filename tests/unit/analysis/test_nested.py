"""The nested (starts x passes) statistics: hand-computed values and simulated coverage."""

from __future__ import annotations

import math
import random

import pytest

from servelab.analysis.nested import (
    compare_design,
    pass_means,
    start_means,
    starts_needed,
    transform,
    variance_components,
)

# Two variants, two starts each, measured in passes 1 and 2 (raw scale).
HAND = {
    "a": {1: {1: 10.0, 2: 12.0}, 2: {1: 11.0, 2: 13.0}},
    "b": {1: {1: 14.0, 2: 16.0}, 2: {1: 16.0, 2: 18.0}},
}


def test_pass_centring_and_start_means_by_hand():
    centres = pass_means(HAND)
    assert centres == {1: 12.75, 2: 14.75}
    assert start_means(HAND["a"], centres) == {1: -2.75, 2: -1.75}
    assert start_means(HAND["b"], centres) == {1: 1.25, 2: 3.25}


def test_comparison_by_hand():
    effect = compare_design(HAND, "a", "b", log_scale=False)
    assert effect is not None
    # Start means differ by 4.5; pooled variance (0.5 + 2) / 2 = 1.25; se = sqrt(1.25);
    # t(2 df, 97.5 %) = 4.302653.
    assert effect.estimate == pytest.approx(4.5)
    half = 4.302653 * math.sqrt(1.25)
    assert (effect.low, effect.high) == pytest.approx((4.5 - half, 4.5 + half), rel=1e-5)
    assert effect.df == 2
    assert effect.starts == (2, 2)
    assert effect.passes == 2
    assert effect.p_value == pytest.approx(0.05656, abs=2e-4)
    change, low, high = effect.as_percent(11.5)
    assert (change, low, high) == pytest.approx(
        (100 * 4.5 / 11.5, 100 * (4.5 - half) / 11.5, 100 * (4.5 + half) / 11.5), rel=1e-5
    )


def test_log_scale_reads_as_a_ratio():
    design = {
        name: {s: {p: transform(v, True) for p, v in passes.items()} for s, passes in cells.items()}
        for name, cells in HAND.items()
    }
    effect = compare_design(design, "a", "b", log_scale=True)
    change, low, high = effect.as_percent(0.0)
    assert low < change < high
    # The geometric means' ratio of the starts, pass-centred (balanced: the plain one).
    a = [math.log(v) for c in HAND["a"].values() for v in c.values()]
    b = [math.log(v) for c in HAND["b"].values() for v in c.values()]
    assert change == pytest.approx(100 * math.expm1(sum(b) / 4 - sum(a) / 4))


def test_nothing_to_test():
    assert compare_design({"a": {1: {1: 1.0}}}, "a", "b", log_scale=False) is None
    single = {"a": {1: {1: 1.0}}, "b": {1: {1: 2.0}}}  # no start repeated: no spread
    assert compare_design(single, "a", "b", log_scale=False) is None
    same = {"a": {1: {1: 1.0}, 2: {1: 1.0}}, "b": {1: {1: 1.0}, 2: {1: 1.0}}}
    effect = compare_design(same, "a", "b", log_scale=False)
    assert effect.estimate == 0 and effect.p_value is None


def simulate(rng, effect, *, starts=3, passes=4, sd_start=0.03, sd_slice=0.05, drift=0.08):
    """log requests/s of a baseline and a variant: pass drift shared, start and slice noise."""
    design = {"base": {}, "var": {}}
    pass_level = {p: rng.gauss(0, drift) for p in range(passes)}
    for name, shift in (("base", 0.0), ("var", effect)):
        for s in range(starts):
            u = rng.gauss(0, sd_start)
            design[name][s] = {
                p: 7.0 + shift + pass_level[p] + u + rng.gauss(0, sd_slice) for p in range(passes)
            }
    return design


@pytest.mark.parametrize("starts", [2, 3, 6])
def test_interval_covers_the_true_effect_about_95_percent_of_the_time(starts):
    rng = random.Random(starts)
    truth = math.log(1.05)
    covered = 0
    trials = 600
    for _ in range(trials):
        effect = compare_design(simulate(rng, truth, starts=starts), "base", "var", log_scale=True)
        covered += effect.low <= truth <= effect.high
    assert 0.92 <= covered / trials <= 0.98


def test_a_and_a_is_called_different_about_5_percent_of_the_time():
    rng = random.Random(7)
    trials = 600
    false = sum(
        compare_design(simulate(rng, 0.0), "base", "var", log_scale=True).p_value < 0.05
        for _ in range(trials)
    )
    assert 0.02 <= false / trials <= 0.08


def test_variance_components_tell_starts_from_slices():
    rng = random.Random(3)
    starts_heavy = simulate(rng, 0.0, starts=8, passes=6, sd_start=0.08, sd_slice=0.01)
    parts = variance_components(starts_heavy)
    assert parts.starts_dominate
    assert parts.between_starts == pytest.approx(0.08**2, rel=0.6)
    slices_heavy = simulate(rng, 0.0, starts=8, passes=2, sd_start=0.0, sd_slice=0.1)
    assert not variance_components(slices_heavy).starts_dominate


def test_the_slices_spread_counts_the_df_the_pass_centring_takes():
    # In turns, a round of three stacks is a block: pass-centring on 3 starts leaves
    # (3 - 1)(P - 1) df a block, not 3(P - 1); counted as 3(P - 1) the slices' variance
    # read 2/3 of the truth, and restarts looked more useful than more passes.
    design = simulate_side_by_side(
        random.Random(0), 0.0, variants=3, rounds=300, passes=2, sd_start=0.0
    )
    parts = variance_components(design)
    assert parts.within_start == pytest.approx(0.02**2, rel=0.15)
    assert parts.between_starts < 0.2 * 0.02**2


def test_starts_needed_scales_with_the_square_of_the_width():
    effect = compare_design(simulate(random.Random(1), 0.0), "base", "var", log_scale=True)
    half = (effect.high - effect.low) / 2
    assert starts_needed(half, 3, half) == 3
    assert starts_needed(half, 3, half / 2) == 12
    assert starts_needed(half, 3, 0) is None
    assert starts_needed(0.0, 3, half) is None


def simulate_side_by_side(rng, effect, *, variants=2, rounds=3, passes=2, sd_start=0.03):
    """Each round its own block: its passes measure only its starts, at shared moments."""
    design = {f"v{i}": {} for i in range(variants)}
    number = 0
    for r in range(rounds):
        moments = {}
        for _ in range(passes):
            number += 1
            moments[number] = rng.gauss(0, 0.1)
        for i in range(variants):
            u = rng.gauss(0, sd_start)
            shift = effect if i == 1 else 0.0
            design[f"v{i}"][r] = {
                n: 7.0 + shift + m + u + rng.gauss(0, 0.02) for n, m in moments.items()
            }
    return design


@pytest.mark.parametrize("variants", [2, 3])
def test_side_by_side_rounds_are_blocks_and_the_interval_keeps_its_coverage(variants):
    rng = random.Random(variants)
    truth = math.log(1.03)
    trials, covered, false = 600, 0, 0
    for _ in range(trials):
        effect = compare_design(
            simulate_side_by_side(rng, truth, variants=variants), "v0", "v1", log_scale=True
        )
        covered += effect.low <= truth <= effect.high
        same = compare_design(
            simulate_side_by_side(rng, 0.0, variants=variants), "v0", "v1", log_scale=True
        )
        false += same.p_value < 0.05
    assert effect.df == (variants - 1) * (3 - 1)  # a randomized block design's error df
    assert 0.92 <= covered / trials <= 0.98
    assert 0.02 <= false / trials <= 0.08


def test_blocks_follow_shared_passes():
    from servelab.analysis.nested import blocks

    design = simulate_side_by_side(random.Random(0), 0.0, variants=2, rounds=3)
    found = blocks(design)
    assert found[("v0", 0)] == found[("v1", 0)] != found[("v0", 1)]
    assert len(set(found.values())) == 3
    assert len(set(blocks(HAND).values())) == 1
