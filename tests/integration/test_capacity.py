"""`servelab capacity` on a real stack whose capacity is known in advance: one gunicorn
sync worker whose every request sleeps 20 ms behind nginx. oha sends at evenly spaced
times, so below 1 / 20 ms = 50 req/s no queue forms (p99 about the sleep), and past it
the queue grows for the whole trial: the capacity at p99 < 200 ms is near 50 req/s, less
what nginx and gunicorn add to each request (a few per cent here), and at most a little
above it in a 3 s trial, whose queue stays short (``support.sleepy_capacity_bound``).
Also: the user's app by --app, every trial trusted and written, nothing left running."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli, sleepy_capacity_bound

pytestmark = pytest.mark.integration

SLEEP_S = 0.02
BOUND = 1 / SLEEP_S  # no single worker serves more


def test_the_interval_holds_the_known_capacity(tmp_path: Path) -> None:
    done = run_cli(
        "capacity", "--app", "servelab.apps.sleepy_wsgi:app", "--workers", "1",
        "--slo", "p99<200ms,errors<1%", "--trial-seconds", "3", "--max-trials", "10",
        # The machine's speed probed before each start, but no start waits for it: beside
        # other tests the stack's CPU is often busy (the waits are tests/unit/capacity's).
        "--machine-wait", "0",
        "--results", str(tmp_path / "r"),
        env={"SERVELAB_SLEEP_S": str(SLEEP_S)},
    )
    assert done.returncode == 0, done.stderr
    [directory] = (tmp_path / "r").glob("capacity-*")
    answer = json.loads((directory / "capacity.json").read_text())
    [variant] = answer["variants"]
    assert variant["interval_rps"] is not None, done.stdout + done.stderr
    low, high = variant["interval_rps"]
    # Below what one worker can serve at all, and not far below it (the stack's own cost
    # per request is a few per cent of 20 ms on this VM, at its slowest under a quarter).
    assert low <= variant["capacity_rps"] <= high
    assert high >= 0.75 * BOUND and low <= BOUND, (low, high)
    assert variant["capacity_rps"] <= sleepy_capacity_bound(SLEEP_S, 0.2, 3.0)  # 53
    trials = [json.loads(line) for line in (directory / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == variant["trials"] and all(not t["problems"] for t in trials)
    assert all(t["cpu_speed"] > 0 and t["waited_s"] == 0 for t in trials)
    assert all(abs(t["send_rate"] / t["rate"] - 1) <= 0.01 for t in trials if t["answered"] > 10)
    assert "holds" in done.stdout and "req/s [" in done.stdout
    assert (directory / "capacity.md").read_text().startswith("# Capacity at p99 < 200 ms")
