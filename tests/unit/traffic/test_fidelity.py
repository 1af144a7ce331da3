"""Fidelity figures of a replay: send lag, mix per route, inter-arrival KS distance."""

from __future__ import annotations

import random

import pytest

from servelab.traffic.fidelity import (
    MAX_LAG_P99_MS,
    SentRequest,
    ks_distance,
    measure_fidelity,
    peak_in_flight,
    percentile,
)


def sent(seq: int, at: float, route: str = "/a") -> SentRequest:
    return SentRequest(seq, at, 0.001, 200, "GET", route, route)


def test_a_replay_on_time_is_kept_with_zero_lag_and_exact_mix() -> None:
    due = [0.0, 0.1, 0.2, 0.3]
    sends = [sent(0, 0.0), sent(1, 0.1, "/b"), sent(2, 0.2), sent(3, 0.3, "/b")]
    fidelity = measure_fidelity(due, {"/a": 2, "/b": 2}, sends)
    assert fidelity.lag_p99_ms == pytest.approx(0.0)
    assert fidelity.max_mix_error_points == pytest.approx(0.0)
    assert fidelity.ks_distance == pytest.approx(0.0)
    assert fidelity.kept and fidelity.problems == ()


def test_lag_is_counted_against_the_schedule_at_its_speed() -> None:
    due = [0.0, 1.0, 2.0]  # at speed 2: 0, 0.5, 1.0
    fidelity = measure_fidelity(due, {"/a": 3}, [sent(0, 0.0), sent(1, 0.502), sent(2, 1.05)],
                                speed=2.0)
    assert fidelity.lag_p50_ms == pytest.approx(2.0)
    assert fidelity.lag_max_ms == pytest.approx(50.0)


def test_a_sender_that_fell_behind_or_left_requests_unsent_did_not_keep_it() -> None:
    due = [i / 100 for i in range(100)]
    late = [sent(i, d + (0.05 if i > 90 else 0)) for i, d in enumerate(due)]
    fidelity = measure_fidelity(due, {"/a": 100}, late)
    assert fidelity.lag_p99_ms > MAX_LAG_P99_MS and not fidelity.kept
    assert "fell behind" in fidelity.problems[0]
    unsent = measure_fidelity(due, {"/a": 100}, [sent(i, d) for i, d in enumerate(due[:90])])
    assert unsent.problems == ("10 of 100 requests unsent",)


def test_the_mix_error_is_in_points_per_route() -> None:
    fidelity = measure_fidelity([0.0] * 4, {"/a": 2, "/b": 2},
                                [sent(0, 0), sent(1, 0), sent(2, 0), sent(3, 0, "/b")])
    by_route = {r.route: r.error_points for r in fidelity.mix}
    assert by_route == pytest.approx({"/a": 25.0, "/b": -25.0})
    assert fidelity.max_mix_error_points == pytest.approx(25.0)


def test_ks_distance_tells_same_from_different_distributions() -> None:
    rng = random.Random(3)
    a = [rng.expovariate(1000) for _ in range(5000)]
    b = [rng.expovariate(1000) for _ in range(5000)]
    bunched = [0.0 if rng.random() < 0.5 else 0.002 for _ in range(5000)]
    assert ks_distance(a, b) < 0.05
    assert ks_distance(a, bunched) > 0.3
    assert ks_distance([], a) == 0.0


def test_percentile_is_nearest_rank() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0
    assert percentile([], 99) == 0.0


def test_the_peak_in_flight_counts_requests_from_their_send_to_their_answer() -> None:
    def out(at: float, latency: float) -> SentRequest:
        return SentRequest(0, at, latency, 200, "GET", "/a", "/a")

    # Three out at 0.15 (sent at 0, 0.1 and 0.15); the one sent at 0.2, as the first
    # and the third are answered, is not counted with them.
    requests = [out(0.0, 0.2), out(0.1, 0.5), out(0.15, 0.05), out(0.2, 0.1), out(0.7, 0.1)]
    assert peak_in_flight(requests) == 3
    assert peak_in_flight([]) == 0
    slow = [SentRequest(i, i / 100, 1.0, 200, "GET", "/a", "/a") for i in range(100)]
    assert measure_fidelity([i / 100 for i in range(100)], {"/a": 100}, slow).peak_in_flight == 100
