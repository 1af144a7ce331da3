"""The speed gauge: its reading's arithmetic, and a real gauge that counts and is reaped."""

from __future__ import annotations

import os
import time

import pytest

from servelab.observe.speed import MIN_GAUGE_CPU_S, GaugeReading, SpeedGauge


def test_speed_is_units_per_second_of_the_gauges_own_cpu_time() -> None:
    earlier = GaugeReading(units=1_000, cpu_ns=2_000_000_000)
    later = GaugeReading(units=31_000, cpu_ns=2_500_000_000)
    assert later.speed_since(earlier) == pytest.approx(60_000.0)


def test_a_gauge_that_barely_ran_reads_nothing() -> None:
    earlier = GaugeReading(units=0, cpu_ns=0)
    later = GaugeReading(units=10, cpu_ns=int(MIN_GAUGE_CPU_S * 1e9 / 2))
    assert later.speed_since(earlier) is None


def test_unpinned_the_gauge_starts_nothing() -> None:
    with SpeedGauge(None) as gauge:
        assert gauge.read() is None


def test_a_real_gauge_counts_on_its_cpu_and_is_reaped() -> None:
    cpu = str(min(os.sched_getaffinity(0)))
    with SpeedGauge(cpu) as gauge:
        first = gauge.read()
        time.sleep(0.3)
        second = gauge.read()
        process = gauge._process
        assert process is not None
    assert first is not None and second is not None
    assert second.units > first.units
    assert second.cpu_ns > first.cpu_ns
    assert not process.is_alive()  # killed and joined on leaving
    assert not os.path.exists(f"/proc/{process.pid}")
