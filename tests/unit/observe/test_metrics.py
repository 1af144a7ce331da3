"""The process sampler's CPU figures, on this test's own process."""

from __future__ import annotations

import os
import time

from servelab.observe.metrics import ProcessSampler


def test_system_time_is_part_of_the_cpu_time() -> None:
    with ProcessSampler({"app": os.getpid()}, interval_s=0.05) as sampler:
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:  # user time, and system time in the calls
            os.stat("/")
            sum(range(1000))
    [usage] = [u for u in sampler.usage() if u.pid == os.getpid()]
    assert usage.system_s is not None
    assert 0.0 < usage.system_s <= usage.cpu_s
