"""The built-in Locust scenario's schedule and what the hooks make of each process's sends
(servelab.load.schedule: the pure parts the locustfiles import)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.load.schedule import (
    ReplayShare,
    Schedule,
    count_send,
    read_share_entries,
    send_rate,
    split_shares,
)
from servelab.traffic.records import LogRecord
from servelab.traffic.schedule import build_schedule


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


def test_sends_are_counted_from_the_first():
    sent = [0, 0.0, 0.0]
    for at in (3.0, 3.5, 4.0):
        count_send(sent, at)
    assert sent == [3, 3.0, 4.0]
    assert send_rate(sent) == pytest.approx(2.0)


def written_schedule(tmp_path: Path) -> Path:
    t0 = 1_800_000_000.0
    records = [LogRecord(t0 + at, "GET", target, 200) for at, target in (
        (0.0, "/items/1"), (0.25, "/items/2?x=1"), (0.5, "/users/7"), (1.0, "/items/3"),
        (1.5, "/items/4"),
    )]
    path = tmp_path / "s.tsv"
    build_schedule(records).write(path)
    return path


def test_a_replays_entries_carry_their_number_time_and_route_and_stop_at_until(tmp_path):
    path = written_schedule(tmp_path)
    entries = read_share_entries(str(path), speed=1.0)
    assert [(e[0], e[1], e[3], e[5]) for e in entries] == [
        (0, 0, "/items/1", "/items/{id}"), (1, 250_000, "/items/2?x=1", "/items/{id}"),
        (2, 500_000, "/users/7", "/users/{id}"), (3, 1_000_000, "/items/3", "/items/{id}"),
        (4, 1_500_000, "/items/4", "/items/{id}"),
    ]
    # A warm-up's first 0.5 s at speed 2: the requests due before 1.0 s of the log.
    assert [e[0] for e in read_share_entries(str(path), speed=2.0, until_s=0.5)] == [0, 1, 2]


def test_shares_are_dealt_in_turn_so_each_keeps_the_logs_shape():
    entries = [(i, i * 1000, "GET", f"/{i}", -1, "/{id}") for i in range(7)]
    shares = split_shares(entries, 3)
    assert [[e[0] for e in share] for share in shares] == [[0, 3, 6], [1, 4], [2, 5]]
    assert sorted(e for share in shares for e in share) == entries
    assert split_shares(entries, 1) == [entries]


def test_a_share_is_taken_in_order_each_request_due_from_the_shares_first_claim():
    entries = [(0, 0, "GET", "/a", -1, "/a"), (5, 400_000, "GET", "/b", -1, "/b")]
    share = ReplayShare(entries, [], speed=2.0)
    first = share.claim(now=100.0)
    assert first == (entries[0], pytest.approx(100.0))
    # Claimed late (all Users were busy): still due at its own time, 0.2 s after the start.
    assert share.claim(now=101.0) == (entries[1], pytest.approx(100.2))
    assert share.claim(now=102.0) is None
