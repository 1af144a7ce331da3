"""Ramp planning and verdicts."""

from __future__ import annotations

import pytest
from support import fake_load, fake_run

from servelab.config.load import SloSpec
from servelab.errors import SpecError
from servelab.measuring.ramp import (
    RampOptions,
    RampPlan,
    build_ramp,
    ramp_should_stop,
    ramp_verdicts,
    slo_problem,
)
from servelab.results.records import RunRecord


def step(rate: float, *, p99: float = 10.0, codes: dict[str, int] | None = None,
         variant: str = "v", repetition: int = 1) -> RunRecord:
    codes = codes if codes is not None else {"200": 100}
    load = fake_load(rps=rate, duration_s=1.0, mean_ms=p99 / 2, p99_ms=p99, codes=codes)
    return fake_run(variant, f"rate-{rate:g}", repetition, experiment="ramp", load=load)


def test_rates_additive_multiplicative_and_capped() -> None:
    assert RampPlan(start=50, stop=200, step=50).rates() == [50, 100, 150, 200]
    assert RampPlan(start=10, stop=100, factor=2).rates() == [10, 20, 40, 80, 100]
    assert RampPlan(start=50, stop=120, step=50).rates() == [50, 100, 120]


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (RampPlan(start=0, stop=10, step=1), "start rate must be positive"),
        (RampPlan(start=-5, stop=10, step=1), "start rate must be positive"),
        (RampPlan(start=20, stop=10, step=1), "below the start rate"),
        (RampPlan(start=1, stop=10, step=0), "step must be positive"),
        (RampPlan(start=1, stop=10, factor=1.0), "factor must be above 1"),
        (RampPlan(start=1, stop=10, step=1, step_s=-2), "step duration"),
        (RampPlan(start=1, stop=10, step=1, step_s=10_000), "step duration"),
        (RampPlan(start=1, stop=10_000, step=1), "steps, more than 40"),
        (RampPlan(start=1e8, stop=1e9, factor=2), "more than 10,000,000"),
        (RampPlan(start=1, stop=10, step=1, timeout_s=0), "timeout must be positive"),
    ],
)
def test_bad_ramps_are_one_line_errors(plan: RampPlan, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        plan.rates()
    assert message in caught.value.one_line()
    assert "\n" not in caught.value.one_line()


def test_every_step_is_bounded_in_count_and_time() -> None:
    plan = RampPlan(start=100, stop=300, step=100, step_s=4, timeout_s=7)
    load = plan.load(300)
    assert (load.model, load.rate, load.requests) == ("open", 300, 1200)
    assert load.max_time_s == 4 + 7 + 5


def test_slo_problem_names_what_broke() -> None:
    slo = SloSpec(p99_ms=100, max_error_ratio=0.05)
    assert slo_problem(step(10, p99=50), slo) is None
    assert "p99" in (slo_problem(step(10, p99=150), slo) or "")
    assert "error ratio 10.0%" in (slo_problem(step(10, codes={"200": 90, "502": 10}), slo) or "")


def test_ramp_goes_past_the_break_to_find_the_first_502() -> None:
    slo = SloSpec(p99_ms=100, extra_steps=2)
    runs = [step(50), step(100, p99=200)]
    assert ramp_should_stop(runs, "v", 1, slo)  is False  # broke, no 502 yet: go on
    runs.append(step(150, p99=300))
    assert not ramp_should_stop(runs, "v", 1, slo)
    runs.append(step(200, p99=300, codes={"200": 90, "502": 10}))
    assert ramp_should_stop(runs, "v", 1, slo)  # the first 502 was found
    assert not ramp_should_stop(runs, "other", 1, slo)  # another variant's own ramp
    assert not ramp_should_stop(runs, "v", 1, None)  # not a ramp
    verdict = ramp_verdicts(runs, slo)[0]
    assert (verdict.sustainable_rate, verdict.broke_at, verdict.first_502_rate) == (50, 100, 200)
    assert "highest sustainable rate 50 req/s" in verdict.summary()


def test_ramp_stops_after_extra_steps_without_a_502() -> None:
    slo = SloSpec(p99_ms=100, extra_steps=1)
    runs = [step(50, p99=200), step(100, p99=300)]
    assert ramp_should_stop(runs, "v", 1, slo)
    verdict = ramp_verdicts(runs, slo)[0]
    assert verdict.sustainable_rate is None and verdict.first_502_rate is None


def test_build_ramp_is_an_experiment_with_an_slo_and_no_warmup() -> None:
    experiment = build_ramp(RampOptions(plan=RampPlan(start=10, stop=30, step=10), somaxconn=64))
    assert [w.name for w in experiment.workloads] == ["rate-10", "rate-20", "rate-30"]
    assert experiment.slo is not None and experiment.warmup.requests == 0
    assert experiment.baseline.network.somaxconn == 64
    assert experiment.baseline.server.worker_class == "sync"
