"""The capacity answer in words: where held and broken trials overlap, the share held
there with its interval; the seconds the starts waited for the machine."""

from __future__ import annotations

import dataclasses

import pytest

from servelab.capacity import parse_slo
from servelab.capacity.answer import band_percent, cpu_line, markdown, variant_line
from servelab.capacity.plan import CapacityPlan, VariantCapacity
from servelab.capacity.search import Estimate, Mixed
from servelab.capacity.trials import Trial
from servelab.errors import SpecError
from servelab.traffic.schedule import ScheduleSize

SLO = parse_slo("p99<100ms,errors<0.1%")
TRIAL = Trial(
    variant="base", number=1, rate=1441.0, started="2026-11-28T00:00:00+0000", seconds=5.0,
    sent=7205, send_rate=1441.0, answered=7205, errors=0,
    latency_ms={"p50": 2.0, "p99": 24.0, "mean": 3.0}, driver_cpu_share=0.2,
    connections=1000, cpu_speed=47_000.0,
)


def _answer(mixed: Mixed | None, trials: tuple[Trial, ...] = (TRIAL,)) -> VariantCapacity:
    estimate = Estimate(1420.0, (1390.0, 1450.0), 1462.0, 1405.0, fitted=7)
    return VariantCapacity("base", estimate, trials, 1900.0, mixed=mixed)


def test_the_share_held_where_trials_overlap_is_said_with_its_interval() -> None:
    line = variant_line(_answer(Mixed(1405, 1462, held=3, trials=7)), SLO, 0.90)
    assert "holds 1,420 req/s [1,390, 1,450] (90 %)" in line
    assert "; between 1,405 and 1,462 req/s 3 of 7 trials held (43 % [" in line
    text = markdown([_answer(Mixed(1405, 1462, held=3, trials=7))], SLO, 0.90, "here")
    assert "- base: between 1,405 and 1,462 req/s 3 of 7 trials held" in text
    assert "| 47,000 |" in text  # the machine's speed before the trial's start


def test_an_overlap_of_two_trials_is_noise_at_the_boundary_not_said() -> None:
    answer = _answer(Mixed(1405, 1410, held=1, trials=2))
    assert "between" not in variant_line(answer, SLO, 0.90)
    assert "overlap" not in markdown([answer], SLO, 0.90, "here")


def test_the_seconds_waited_for_the_machine_are_said() -> None:
    waited = (dataclasses.replace(TRIAL, waited_s=10.0),
              dataclasses.replace(TRIAL, number=2, waited_s=60.0, started_slow=True))
    line = variant_line(_answer(None, waited), SLO, 0.90)
    assert line.endswith(
        "2 trials; its starts waited 70 s for the machine's own speed (1 started slow all "
        "the same)"
    )
    assert "| 47,000 (waited 60 s, still slow) |" in markdown([_answer(None, waited)], SLO,
                                                               0.90, "here")


def _cpu_trial(number: int, rate: float, p99: float, share: float) -> Trial:
    return dataclasses.replace(
        TRIAL, number=number, rate=rate, latency_ms={"p50": 2.0, "p99": p99, "mean": 3.0},
        stack_cpu_share=share, cpu_s={"app 11": share * 5.0},
    )


def test_a_stack_that_broke_with_its_cpus_full_is_said_to_be_out_of_cpu() -> None:
    trials = (
        _cpu_trial(1, 700.0, 5.0, 0.45),  # far below the capacity: not counted
        _cpu_trial(2, 1380.0, 20.0, 0.88), _cpu_trial(3, 1440.0, 60.0, 0.93),
        _cpu_trial(4, 1470.0, 300.0, 0.99), _cpu_trial(5, 1500.0, 900.0, 1.01),
    )
    assert cpu_line(_answer(None, trials), SLO) == (
        "base: near its capacity the stack's CPUs were 88-93 % busy where it held, "
        "99-101 % where it broke: out of CPU"
    )
    assert "CPU" not in variant_line(_answer(None, trials), SLO, 0.90)  # a line of its own
    text = markdown([_answer(None, trials)], SLO, 0.90, "here")
    assert "- base: near its capacity the stack's CPUs were 88-93 %" in text
    assert f"| 93 % ({1000 * 0.93 * 5.0 / TRIAL.answered:.2f} ms a request) |" in text
    assert "Stack CPU: the share of the stack's CPUs" in text


def test_a_stack_that_broke_with_cpu_to_spare_waited_on_something() -> None:
    trials = (_cpu_trial(1, 1400.0, 20.0, 0.50), _cpu_trial(2, 1480.0, 400.0, 0.55))
    assert cpu_line(_answer(None, trials), SLO) == (
        "base: near its capacity the stack's CPUs were 50 % busy where it held, 55 % "
        "where it broke: with CPU to spare, it waited on something"
    )


def test_without_the_stacks_cpu_nothing_is_said_of_it() -> None:
    assert cpu_line(_answer(None), SLO) is None
    text = markdown([_answer(None)], SLO, 0.90, "here")
    assert "| - |" in text and "What ran out" not in text


def _on_curve(steep: bool) -> VariantCapacity:
    from servelab.capacity.curve import HoldingCurve, SharePoint

    hold = SharePoint(0.9, 1380.0, (1320.0, 1430.0))
    half = SharePoint(0.5, 1470.0 if not steep else 1395.0,
                      (1440.0, 1500.0) if not steep else (1370.0, 1420.0))
    curve = HoldingCurve(
        a=30.0, b=4.0, s=0.2, confidence=0.9, hold=hold, half=half,
        band=(1.03, 1.10) if not steep else (1.0, 1.02), steep=steep, fitted=18,
        rates=(1200.0, 1600.0),
    )
    estimate = Estimate(1380.0, (1320.0, 1430.0), 1462.0, 1405.0, fitted=18)
    return VariantCapacity("base", estimate, (TRIAL,), 1900.0, curve=curve)


def test_a_wide_band_is_said_as_both_points_never_one_number() -> None:
    line = variant_line(_on_curve(steep=False), SLO, 0.90)
    assert "holds 1,380 req/s [1,320, 1,430] (90 %) in 90 % of trials" in line
    assert "and 1,470 req/s [1,440, 1,500] (90 %) in half of them" in line
    assert "a band of 6.5 %" in line and "sharp" not in line
    table = markdown([_on_curve(steep=False)], SLO, 0.90, "here")
    assert "| base | 1,380 | [1,320, 1,430] | 1,470 | [1,440, 1,500] | a band of 6.5 % |" in table


def test_a_sharp_edge_is_one_number() -> None:
    line = variant_line(_on_curve(steep=True), SLO, 0.90)
    assert "holds 1,380 req/s [1,320, 1,430] (90 %) in 90 % of trials; a sharp edge" in line
    assert "in half of them at 1,395, within that interval" in line
    assert "[1,370" not in line  # the half point's own interval is not a second answer
    assert "| sharp |" in markdown([_on_curve(steep=True)], SLO, 0.90, "here")


def test_a_replay_that_held_until_its_log_ran_out_says_so() -> None:
    """A 10 s log: no trial faster than 5x (2 s of log); held there, the answer says the
    log ran out, not that the stack holds only that much."""
    traffic = ScheduleSize(requests=500, duration_s=10.0, peak_second=70.0)
    settings = CapacityPlan(slo=SLO).replay_settings(traffic.duration_s)
    assert settings.max_rate == 5.0 and settings.start_rate == 1.0
    held = Estimate(5.0, None, 5.0, None, above_max=True)
    line = variant_line(VariantCapacity("base", held, (TRIAL,), None, traffic=traffic), SLO, 0.9)
    assert "holds the SLO at every rate tried, up to 5.00x" in line
    assert "where the log runs out: its 10 s last 2.0 s at that speed" in line
    short = Estimate(32.0, None, 32.0, None, above_max=True)  # --max-rate, a long log
    long_log = dataclasses.replace(traffic, duration_s=600.0)
    line = variant_line(VariantCapacity("base", short, (TRIAL,), None, traffic=long_log), SLO, 0.9)
    assert "runs out" not in line


def test_a_log_too_short_for_any_trial_is_refused() -> None:
    with pytest.raises(SpecError, match="too short for a trial of 2 s"):
        CapacityPlan(slo=SLO).replay_settings(0.05)


def test_a_narrow_band_keeps_its_decimal() -> None:
    """A ratio of 1.005 is a band of 0.5 %, not "0 %"; a wide one needs no decimal."""
    assert band_percent(1.005) == "0.5 %"
    assert band_percent(1.0652) == "6.5 %"
    assert band_percent(1.234) == "23 %"


def _replay_answer(**changes) -> VariantCapacity:
    traffic = ScheduleSize(requests=9981, duration_s=30.0, peak_second=600.0)
    values: dict = dict(
        estimate=Estimate(2.94, None, 3.05, 2.58, fitted=14),
        mixed=Mixed(2.58, 3.05, held=8, trials=14), traffic=traffic,
    )
    return VariantCapacity("base", trials=(TRIAL,), probed_rps=None, **{**values, **changes})


def test_a_replays_speeds_are_said_with_two_decimals_never_as_rates() -> None:
    """Where held and broken trials overlap, where the driver stopped, and what the budget
    left: in x the log's traffic, two decimals (they were "between 3 and 3 req/s")."""
    line = variant_line(_replay_answer(), SLO, 0.90)
    assert "; between 2.58x and 3.05x this log's traffic 8 of 14 trials held (57 % [" in line
    assert "holds about 2.94x this log's traffic, no interval yet (held 3.05x, broke at " \
        "2.58x): give it more --max-trials" in line
    peak = f" (the log's peak second then {600.0 * 2.94:,.0f} req/s)"
    assert peak in line and "req/s" not in line.replace(peak, "")
    text = markdown([_replay_answer()], SLO, 0.90, "here")
    assert "- base: between 2.58x and 3.05x this log's traffic 8 of 14 trials held" in text
    assert f"| base | 1 | {TRIAL.rate:,.2f}x |" in text  # each trial's speed
    spent = variant_line(_replay_answer(budget_spent_s=291.4), SLO, 0.90)
    assert "give it more --budget" in spent
    assert "; its budget spent (291 s): a longer --budget narrows it" in spent
    driver = variant_line(_replay_answer(sender_limit=12.5), SLO, 0.90)
    assert "; the load driver ran out of CPU at 12.50x this log's traffic: searched below " \
        "it; to search higher, split the load over machines" in driver


def test_an_answer_cut_short_before_any_trial_broke_says_what_held() -> None:
    """Its budget spent (or its driver stopped) while every trial held, or every one
    broke: what held, or where it broke, not 'no answer'."""
    held = Estimate(None, None, 4.0, None)
    line = variant_line(_replay_answer(estimate=held, mixed=None, budget_spent_s=300.0),
                        SLO, 0.90)
    assert "holds the SLO at every rate tried, up to 4.00x this log's traffic" in line
    assert "no answer" not in line
    broke = Estimate(None, None, None, 0.5)  # halving down from 1x, above --min-rate
    line = variant_line(_replay_answer(estimate=broke, mixed=None, budget_spent_s=300.0),
                        SLO, 0.90)
    assert "breaks the SLO at every rate tried, down to 0.50x this log's traffic" in line
