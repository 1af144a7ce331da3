"""The process sampler's CPU figures, on this test's own process."""

from __future__ import annotations

import os
import time

from servelab.observe.metrics import ProcessSampler


def test_system_time_is_part_of_the_cpu_time() -> None:
    with ProcessSampler({"app": os.getpid()}, interval_s=0.05) as sampler:
        # User time, and system time in the calls, until the kernel has counted some of
        # both (it counts in clock ticks: a busy test run can give 0.3 s of this loop too
        # few of them for any system time; seen once under -n 2).
        started = os.times()
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            os.stat("/")
            sum(range(1000))
            now = os.times()
            if now.system - started.system >= 0.05 and now.user - started.user >= 0.05:
                break
        time.sleep(0.1)  # a sample after the loop
    [usage] = [u for u in sampler.usage() if u.pid == os.getpid()]
    assert usage.system_s is not None
    assert 0.0 < usage.system_s <= usage.cpu_s
