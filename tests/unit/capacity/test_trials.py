"""Whether a trial is trusted: the driver delivered the rate, was not CPU-bound, and had
connections enough for the requests in flight (Little's law)."""

from __future__ import annotations

from servelab.capacity.slo import parse_slo
from servelab.capacity.trials import Trial, judged

SLO = parse_slo("p99<100ms,errors<1%")


def _trial(**changes) -> Trial:
    values = dict(
        variant="base", number=1, rate=200.0, started="t", seconds=5.0, sent=1000,
        send_rate=200.0, answered=1000, errors=0,
        latency_ms={"p50": 5.0, "p90": 8.0, "p95": 9.0, "p99": 20.0, "p999": 30.0,
                    "mean": 6.0},
        driver_cpu_share=0.3, connections=1000,
    )
    return judged(Trial(**{**values, **changes}), SLO)


def test_a_trial_the_driver_delivered_is_trusted() -> None:
    trial = _trial()
    assert trial.trusted and trial.outcome(SLO).held
    assert trial.in_flight == 200 * 6 / 1000
    assert Trial.from_dict(trial.to_dict()) == trial


def test_a_cpu_bound_driver_is_not_trusted_whatever_the_outcome() -> None:
    assert not _trial(driver_cpu_share=0.95).trusted
    broke = _trial(driver_cpu_share=0.95, latency_ms={**_trial().latency_ms, "p99": 500.0})
    assert not broke.outcome(SLO).held and not broke.trusted
    assert "the load driver used 95 % of its CPUs" in broke.problems[0]


def test_a_held_trial_sent_short_of_its_rate_is_not_trusted() -> None:
    assert _trial(send_rate=198.5).trusted  # within 1 %
    short = _trial(send_rate=190.0)
    assert not short.trusted and "190.0 req/s of the 200.0 asked" in short.problems[0]
    # Broken anyway: requests that waited for their send were counted from their intended
    # send time, so the stack did not hold the rate.
    broke = _trial(send_rate=150.0, latency_ms={**_trial().latency_ms, "p99": 900.0})
    assert broke.trusted and not broke.outcome(SLO).held


def test_connections_full_by_littles_law_is_not_trusted_when_held() -> None:
    # 200 req/s x 90 ms in flight = 18 requests: 20 connections are (nearly) full.
    full = _trial(connections=20, latency_ms={**_trial().latency_ms, "mean": 90.0})
    assert not full.trusted and "filled the driver's 20 connections" in full.problems[0]
    assert _trial(connections=1000, latency_ms={**_trial().latency_ms, "mean": 90.0}).trusted


def test_errors_break_the_slo() -> None:
    trial = _trial(errors=20)  # 2 % of 1000
    assert trial.error_ratio == 0.02
    assert trial.outcome(SLO).errors_broke and not trial.outcome(SLO).held
