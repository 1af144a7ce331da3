"""Whether a trial is trusted: the driver delivered the rate, was not CPU-bound, and had
connections enough for the requests in flight (Little's law)."""

from __future__ import annotations

from servelab.capacity.slo import parse_slo
from servelab.capacity.trials import Sender, Trial, judged, percent, sender_words

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


BEHIND = ("the sender fell behind its schedule: send lag p99 874.0 ms (above 10 ms)",)


def _replayed(**changes) -> Trial:
    """A replay's trial whose sender fell behind (``changes`` say why)."""
    values = dict(asked_rps=200.0, replay_problems=BEHIND, send_lag_p99_ms=874.0,
                  sent_share=1.0, connections=1000)
    return _trial(**{**values, **changes})


def test_a_sender_held_up_by_the_stack_is_a_broken_trial_charged_to_the_stack() -> None:
    """Behind with every connection busy and CPU to spare: the stack did not answer. The
    trial is trusted and broken, even where its latencies stayed under the bound."""
    slow = {**_trial().latency_ms, "p99": 1300.0, "mean": 600.0}
    held_up = _replayed(peak_in_flight=1000, latency_ms=slow)
    assert held_up.sender is Sender.HELD_UP and held_up.held_up and held_up.trusted
    assert not held_up.outcome(SLO).held and not held_up.outcome(SLO).errors_broke
    quick = _replayed(peak_in_flight=950)  # p99 20 ms: its latencies alone would hold
    assert quick.trusted and quick.outcome(SLO).errors_broke and not quick.outcome(SLO).held
    assert sender_words(held_up) == (
        "send lag p99 874.0 ms, 100 % sent: held up by the stack, 1,000 of its 1,000 "
        "connections busy"
    )
    # Where the sender did not count them, Little's law's mean: 200 req/s x 6 s.
    assert _replayed(latency_ms={**slow, "mean": 6000.0}).sender is Sender.HELD_UP
    assert Trial.from_dict(held_up.to_dict()) == held_up


def test_a_sender_out_of_cpu_is_not_trusted_whoever_was_waiting() -> None:
    out = _replayed(peak_in_flight=1000, driver_cpu_share=0.96)
    assert out.sender is Sender.OUT_OF_CPU and not out.trusted
    assert "the load driver used 96 % of its CPUs" in out.problems[0]
    assert BEHIND[0] in out.problems
    kept = _trial(driver_cpu_share=0.96)  # a fixed rate's driver as before
    assert kept.sender is Sender.OUT_OF_CPU and not kept.trusted


def test_a_sender_behind_with_cpu_and_connections_to_spare_is_not_trusted() -> None:
    starved = _replayed(peak_in_flight=40)
    assert starved.sender is Sender.STARVED and not starved.trusted
    assert BEHIND[0] == starved.problems[0]
    assert "at most 40 of 1,000 busy" in starved.problems[1]
    assert "other processes took its CPU" in starved.problems[1]


def test_a_replay_its_sender_kept_says_its_lag_and_share_sent() -> None:
    kept = _trial(asked_rps=200.0, send_lag_p99_ms=1.62, sent_share=0.99995)
    assert kept.sender is Sender.KEPT and kept.trusted
    assert sender_words(kept) == "send lag p99 1.6 ms, 99.9 % sent"  # never rounded to all
    assert sender_words(_trial()) == ""  # a fixed rate: no replay figures
    assert percent(1.0) == "100 %" and percent(0.5) == "50.0 %"
