"""Passes in turns without restarting the load driver: one driver per stack of the round,
started once for all of a workload's passes and stopped (SIGSTOP) except in its stack's
turns, switched every ``SWITCH_S``. Pure parts: when it applies, the turns of each pass,
the driver's clock against servelab's, and a slice's figures from the driver's requests.

Why: with the driver started anew for every 1 s slice, its connection ramp takes the
first 35-50 ms and the first 0.25 s serves 20-27 % less; slices of 0.5 s, which share
part of the machine's slow moments with their neighbours, then cost more than they
gain. A driver kept connected and switched pays ~50 ms per switch instead: the stopped
driver's requests in flight are still served, and read when it resumes. Counting each
turn from ``SETTLE_S`` after the switch leaves them out. Measured on this project's VM
(``benchmarks/spread.py alternate``, docs/validation/spread.md): two identical warm stacks
read 2.1-2.8 times narrower per minute on a cheap endpoint (sync-small), 1.1-1.5 times
on async-small, and *wider* on a slow one (sync-big, ~120 requests/s at concurrency 50),
where draining the requests in flight takes most of a turn: hence ``drains_in_time``.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from servelab.plugins.driver import Answer
from servelab.results.records import LoadMeasurement, weighted_percentile

SWITCH_S = 0.5  # a stack's turn
SETTLE_S = 0.15  # counted from this long after the switch: the other's requests drained
TAIL_S = 0.02  # and up to this long before the next one (the stop lands a few ms late)
# How far before a turn's expected start its first answer is looked for (the driver's
# clock begins a few ms after servelab resumes it the first time).
_FIRST_ANSWER_SLACK_S = 0.05


def drains_in_time(concurrency: int, rates: Sequence[float]) -> bool:
    """Whether the stacks serve a stopped driver's requests in flight within the settle
    time: ``concurrency`` requests at the median start's rate (its warm-up's requests/s;
    the median, as one cold start's single short warm-up round can read far low)."""
    if not rates or min(rates) <= 0:
        return False
    return concurrency / statistics.median(rates) <= SETTLE_S


def turn_orders(orders: Sequence[Sequence[int]], slice_s: float) -> list[list[int]]:
    """Each pass's turns (stack indices in the order they drive): the pass's order of
    stacks repeated so that each stack's turns add up to about ``slice_s`` (A B C A B C
    for 1 s slices), one slice per stack per pass as when the driver starts anew."""
    repeats = max(1, round(slice_s / SWITCH_S))
    return [list(order) * repeats for order in orders]


@dataclass(frozen=True)
class Turn:
    """One stack's turn, on servelab's clock (time.monotonic)."""

    stack: int
    pass_index: int
    resumed: float
    counted_from: float  # the slice counts answers from here ...
    counted_to: float  # ... to here


def driver_offset(answers: Sequence[Answer], turns: Sequence[Turn]) -> float | None:
    """servelab's clock minus the driver's, from the driver's own answers: a resumed
    driver reads at once the answers that came while it was stopped, so its first answer
    in each turn marks the moment it resumed. The median over its turns after the first
    (in the first it starts and connects); None when no turn shows one."""
    if len(turns) < 2:
        return None
    ends = sorted(a.end for a in answers)
    rough = turns[0].resumed  # the driver's clock starts when it first resumes
    found = []
    for turn in turns[1:]:
        expected = turn.resumed - rough - _FIRST_ANSWER_SLACK_S
        at = bisect.bisect_left(ends, expected)
        if at < len(ends) and ends[at] < turn.counted_to - rough:
            found.append(turn.resumed - ends[at])
    return statistics.median(found) if found else None


@dataclass(frozen=True)
class SliceAnswers:
    """What one stack's turns of one pass measured: the answers counted, and the
    latencies of those sent and answered within a turn with their weights."""

    load: LoadMeasurement
    latencies_ms: tuple[float, ...]
    weights: tuple[float, ...]


def slice_answers(
    answers: Sequence[Answer], turns: Sequence[Turn], offset: float, driver: str
) -> SliceAnswers:
    """The slice of ``turns`` (one stack's, in one pass), from ``answers`` in the order
    answered (``LoadDriver.answers``): requests/s from the answers
    that came between each turn's ``counted_from`` and ``counted_to``; latencies from
    those of them also sent in the turn (the others waited while the driver was stopped).

    A request of latency L > SETTLE_S is seen only if sent in the first
    (turn length - L) of its turn, so long requests are under-sampled: each latency is
    weighted by the inverse of its chance of being seen (Horvitz-Thompson), which makes
    the percentiles those of every request sent, up to the turn's length (longer ones
    cannot be seen at all; ``drains_in_time`` keeps the mean latency under SETTLE_S).
    """
    counted: list[Answer] = []
    sampled: list[tuple[float, float]] = []
    seconds = 0.0
    for turn in turns:
        resumed = turn.resumed - offset
        low, high = turn.counted_from - offset, turn.counted_to - offset
        seconds += high - low
        # ``answers`` are in the order answered: the turn's are one run of them.
        first = bisect.bisect_right(answers, low, key=lambda a: a.end)
        last = bisect.bisect_right(answers, high, key=lambda a: a.end)
        for answer in answers[first:last]:
            counted.append(answer)
            if answer.start >= resumed:
                latency = answer.end - answer.start
                visible = min(high - low, high - resumed - latency)
                if visible > 0:
                    sampled.append((latency * 1000.0, (high - low) / visible))
    sampled.sort()
    weights = [w for _, w in sampled]
    total = sum(weights)
    statuses = Counter(str(a.status) for a in counted)
    load = LoadMeasurement(
        driver=driver,
        requests_total=len(counted),
        duration_s=round(seconds, 6),
        rps=len(counted) / seconds if seconds > 0 else 0.0,
        latency_mean_ms=sum(ms * w for ms, w in sampled) / total if total else 0.0,
        latency_p50_ms=weighted_percentile(sampled, 50),
        latency_p90_ms=weighted_percentile(sampled, 90),
        latency_p99_ms=weighted_percentile(sampled, 99),
        latency_max_ms=sampled[-1][0] if sampled else 0.0,
        status_counts=dict(sorted(statuses.items())),
        connection_errors={},
        bytes_received=sum(a.size for a in counted),
    )
    return SliceAnswers(load, tuple(ms for ms, _ in sampled), tuple(weights))

