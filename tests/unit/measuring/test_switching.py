"""Switched passes' pure parts: when they apply, the turns, the driver's clock, and a
slice's figures from the driver's answers (servelab.measuring.switching)."""

from __future__ import annotations

import random

import pytest

from servelab.measuring.switching import (
    SETTLE_S,
    SWITCH_S,
    TAIL_S,
    Turn,
    drains_in_time,
    driver_offset,
    slice_answers,
    turn_orders,
)
from servelab.plugins.driver import Answer


def test_only_stacks_that_drain_the_requests_in_flight_within_the_settle_time():
    assert drains_in_time(50, [700.0, 1100.0])  # sync-small: 0.07 s
    assert not drains_in_time(50, [120.0, 130.0, 110.0])  # sync-big: 0.4 s
    # The median start decides: one cold start's low warm-up does not.
    assert drains_in_time(50, [700.0, 350.0, 650.0])
    assert not drains_in_time(50, [700.0, 120.0, 130.0])
    assert not drains_in_time(50, [])
    assert not drains_in_time(50, [0.0])


def test_a_pass_repeats_its_order_to_fill_a_slice():
    assert turn_orders([[0, 1, 2], [1, 2, 0]], 1.0) == [[0, 1, 2, 0, 1, 2], [1, 2, 0, 1, 2, 0]]
    assert turn_orders([[1, 0]], 0.5) == [[1, 0]]
    assert turn_orders([[1, 0]], 0.2) == [[1, 0]]  # never less than one turn


def schedule(stacks: int, passes: int, began: float = 1000.0) -> list[Turn]:
    """Back-to-back turns of ``stacks`` stacks, as the executor times them."""
    turns = []
    moment = began
    for pass_index in range(passes):
        for stack in range(stacks):
            turns.append(Turn(stack, pass_index, moment, moment + SETTLE_S,
                              moment + SWITCH_S - TAIL_S))
            moment += SWITCH_S
    return turns


def driven(turns: list[Turn], offset: float, rate: float, latency_of, seed: int = 0
           ) -> list[Answer]:
    """A driver's answers in its turns: requests sent at ``rate`` from each resume (on its
    own clock: servelab's minus ``offset``) until it is stopped, each answered after
    ``latency_of(rng)``; those not answered before the stop are read at the next resume
    (the first answers of a turn)."""
    rng = random.Random(seed)
    answers = []
    for i, turn in enumerate(turns):
        resumed, stopped = turn.resumed - offset, turn.resumed + SWITCH_S - offset
        sent = resumed
        while sent < stopped:
            end = sent + latency_of(rng)
            if end > stopped:  # read when it resumes next
                if i + 1 == len(turns):
                    break
                end = turns[i + 1].resumed - offset + 0.0005
            answers.append(Answer(sent, end, 200, 10))
            sent += 1 / rate
    return sorted(answers, key=lambda a: a.end)


def test_the_drivers_clock_is_found_from_its_first_answers_after_each_resume():
    turns = [t for t in schedule(3, 6) if t.stack == 1]
    offset = turns[0].resumed + 0.004  # its clock began 4 ms after its first resume
    answers = driven(turns, offset, 800.0, lambda rng: 0.03)
    found = driver_offset(answers, turns)
    assert found == pytest.approx(offset, abs=0.002)
    assert driver_offset(answers, turns[:1]) is None  # the first turn alone: no marker


def test_a_slice_counts_the_answers_of_its_turns_counted_part():
    turns = [t for t in schedule(2, 4) if t.stack == 0]
    offset = turns[0].resumed
    answers = driven(turns, offset, 1000.0, lambda rng: 0.02)
    mine = [t for t in turns if t.pass_index in (1, 2)]
    counted = slice_answers(answers, mine, offset, "oha")
    counted_s = 2 * (SWITCH_S - SETTLE_S - TAIL_S)
    assert counted.load.duration_s == pytest.approx(counted_s)
    assert counted.load.rps == pytest.approx(1000.0, rel=0.01)
    assert counted.load.status_counts == {"200": counted.load.requests_total}
    assert counted.load.latency_p99_ms == pytest.approx(20.0)
    assert counted.weights == tuple([1.0] * len(counted.weights))  # all within the settle


def test_long_requests_are_weighted_back_to_their_share_of_what_was_sent():
    """Half the requests take 250 ms: a turn sees fewer of them (only those sent in its
    first 0.23 s end in its counted part, against 0.33 s for the short ones); weighted,
    the slice's median and mean are those of everything sent; unweighted, the long ones
    would be about 41 %, not half."""
    turns = [t for t in schedule(2, 40) if t.stack == 0]
    offset = turns[0].resumed
    answers = driven(turns, offset, 2000.0,
                     lambda rng: 0.25 if rng.random() < 0.5 else 0.01, seed=3)
    counted = slice_answers(answers, turns[1:], offset, "oha")
    pairs = list(zip(counted.latencies_ms, counted.weights, strict=True))
    long_share = sum(w for ms, w in pairs if ms > 100) / sum(counted.weights)
    assert long_share == pytest.approx(0.5, abs=0.03)
    unweighted = sum(1 for ms, _ in pairs if ms > 100) / len(pairs)
    assert unweighted < 0.44
    assert counted.load.latency_mean_ms == pytest.approx((250 + 10) / 2, rel=0.05)
    assert counted.load.latency_p90_ms == pytest.approx(250.0)


def test_errors_are_counted_by_status():
    turn = schedule(1, 1)[0]
    offset = turn.resumed
    inside = turn.counted_from - offset + 0.01
    answers = [Answer(inside - 0.3, inside - 0.2, 200, 5),  # before the counted part
               Answer(inside - 0.005, inside, 200, 5), Answer(inside - 0.004, inside, 502, 0)]
    counted = slice_answers(answers, [turn], offset, "oha")
    assert counted.load.status_counts == {"200": 1, "502": 1}
    assert counted.load.requests_total == 2 and counted.load.bytes_received == 5
