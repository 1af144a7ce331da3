"""What moved during a capacity search: the machine's speed and the stack's CPU per
request over the trials, as figures."""

from __future__ import annotations

import pytest

from servelab.capacity.drift import drift, spread
from servelab.capacity.trials import Trial


def trial(number: int, speed: float | None, cpu_s: float | None, **changes) -> Trial:
    values = dict(
        variant="base", number=number, rate=200.0, started="t", seconds=5.0, sent=1000,
        send_rate=200.0, answered=1000, errors=0, latency_ms={"p99": 20.0, "mean": 6.0},
        driver_cpu_share=0.3, connections=1000, cpu_speed=speed,
        cpu_s={} if cpu_s is None else {"app 1": cpu_s},
    )
    return Trial(**{**values, **changes})


def test_a_spread_states_range_cv_and_the_drift_from_first_to_last_third() -> None:
    found = spread([100.0, 100.0, 100.0, 110.0, 110.0, 110.0])
    assert found is not None
    assert (found.low, found.high) == (100.0, 110.0)
    assert found.first_to_last == pytest.approx(0.10)
    assert found.cv == pytest.approx(0.0522, abs=1e-3)
    assert "+10.0 % from the first third" in found.words("units/s")
    assert spread([1.0, 2.0]) is None


def test_drift_reads_trusted_trials_only_and_says_each_figure() -> None:
    trials = [trial(1, 1000.0, 0.6), trial(2, 1100.0, 0.66), trial(3, 900.0, 0.63),
              trial(4, 10.0, 9.0, problems=("untrusted",))]
    found = drift(trials)
    assert found.machine_speed is not None and found.machine_speed.low == 900.0
    assert found.cpu_ms_per_request is not None
    assert found.cpu_ms_per_request.high == pytest.approx(0.66)
    lines = found.lines("base")
    assert lines[0].startswith("base: the machine's own speed 900-1,100 units/s")
    assert "the stack's CPU per request 0.600-0.660 ms" in lines[1]


def test_nothing_measured_says_nothing() -> None:
    assert drift([trial(1, None, None), trial(2, None, None), trial(3, None, None)]).lines(
        "base") == []
