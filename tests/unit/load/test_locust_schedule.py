"""The built-in Locust scenario's schedule and what the hooks make of each process's sends
(servelab.load.schedule: the pure parts the locustfiles import)."""

from __future__ import annotations

import pytest

from servelab.load.schedule import Schedule, send_rate


def test_send_times_are_evenly_spaced_whenever_the_users_take_them():
    """Free users take the next time at once (several ahead); one period apart whatever
    the moments they ask, the first at the offset's share of a period."""
    schedule = Schedule(offset=0.25)
    times = [schedule.claim(now, 0.1) for now in (10.0, 10.0, 10.01, 10.3, 10.31)]
    assert times == pytest.approx([10.025, 10.125, 10.225, 10.325, 10.425])


def test_a_late_claim_takes_a_time_already_past_and_the_schedule_goes_on():
    """All users busy for a second: the next free one takes the oldest time not taken
    (its latency then counts from there), not a time from now."""
    schedule = Schedule(offset=0.0)
    assert schedule.claim(5.0, 0.1) == pytest.approx(5.0)
    late = [schedule.claim(6.0, 0.1) for _ in range(3)]
    assert late == pytest.approx([5.1, 5.2, 5.3])
    assert all(at < 6.0 for at in late)


def test_a_schedule_with_a_length_sends_that_long_from_its_first_claim_by_its_own_clock():
    """3 s at 10 a second: 30 sends whatever the moments the users ask (a worker whose
    stop message comes late sends no more); unbounded without a length."""
    schedule = Schedule(offset=0.5, length_s=3.0)
    claimed = [schedule.claim(100.0 + 0.05 * i, 0.1) for i in range(60)]
    assert sum(schedule.sends(at) for at in claimed) == 30
    assert max(at for at in claimed if schedule.sends(at)) == pytest.approx(102.95)
    unbounded = Schedule(offset=0.5)
    assert all(unbounded.sends(unbounded.claim(100.0, 0.1)) for _ in range(1000))


def test_a_process_send_rate_is_its_requests_over_its_sending_time():
    assert send_rate([101, 10.0, 12.0]) == pytest.approx(50.0)
    assert send_rate([1, 10.0, 10.0]) == 0.0  # one send is no rate
    assert send_rate([0, 0.0, 0.0]) == 0.0
