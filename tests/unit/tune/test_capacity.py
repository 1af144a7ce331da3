"""tune's max-capacity objective: which finalist is recommended from their capacities
(pure), what tune.md says, and the objective's one-line errors."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servelab.capacity.compare import compare_capacities
from servelab.capacity.plan import VariantCapacity
from servelab.capacity.search import Estimate
from servelab.errors import SpecError
from servelab.tune.capacity import CAPACITY_HEADING, choice_markdown, choose
from servelab.tune.objective import Objective

SLO = "p99<100ms,errors<0.1%"


def _answer(name: str, rate: float | None, half_pct: float = 3.0) -> VariantCapacity:
    interval = None if rate is None else (rate * (1 - half_pct / 100),
                                          rate * (1 + half_pct / 100))
    return VariantCapacity(name, Estimate(rate, interval, None, None), (), None)


def _chosen(*answers: VariantCapacity):
    return replace(choose(answers, compare_capacities(answers, 0.9)), slo=SLO)


def test_a_finalist_that_holds_significantly_more_is_recommended() -> None:
    choice = _chosen(_answer("w=4", 1000), _answer("w=5", 1250), _answer("w=3", 1150))
    assert choice.candidate == "w=5"  # the most of the two that hold more
    assert "than the race's choice w=4" in choice.reason
    text = choice_markdown(choice)
    assert text.startswith(CAPACITY_HEADING)
    assert "**Recommended for the most traffic at p99 < 100 ms, errors < 0.1 %: w=5**" in text
    assert "- w=5: +25 % [" in text


def test_each_finalist_says_what_ran_out_where_its_cpu_was_measured() -> None:
    from servelab.capacity.trials import Trial

    def trial(rate: float, p99: float, share: float) -> Trial:
        return Trial(
            variant="w=4", number=1, rate=rate, started="2026-11-28T00:00:00+0000",
            seconds=5.0, sent=5000, send_rate=rate, answered=5000, errors=0,
            latency_ms={"p50": 2.0, "p99": p99, "mean": 3.0}, driver_cpu_share=0.2,
            connections=1000, stack_cpu_share=share, cpu_s={"app 11": share * 5.0},
        )

    measured = replace(_answer("w=4", 1000), trials=(trial(980, 40, 0.93), trial(1040, 400, 0.99)))
    text = choice_markdown(_chosen(measured, _answer("w=5", 1250)))
    assert ("- w=4: holds 1,000 req/s" in text and "\n  - w=4: near its capacity the stack's "
            "CPUs were 93 % busy where it held, 99 % where it broke: out of CPU\n" in text)
    assert "w=5: near its capacity" not in text  # no CPU measured, nothing said


def test_the_race_choice_stands_when_no_finalist_holds_more() -> None:
    choice = _chosen(_answer("w=4", 1000), _answer("w=5", 1010), _answer("w=3", 800))
    assert choice.candidate == "w=4"
    assert "no finalist holds significantly more" in choice.reason
    assert "w=5 not told apart" in choice.reason


def test_no_recommendation_without_a_capacity_of_the_race_choice() -> None:
    choice = _chosen(_answer("w=4", None), _answer("w=5", None))
    assert choice.candidate is None
    assert "**No recommendation by capacity**" in choice_markdown(choice)


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"kind": "max-capacity"}, "--objective max-capacity and --slo go together"),
    ({"kind": "max-rps", "slo": SLO}, "--objective max-capacity and --slo go together"),
    ({"kind": "max-capacity", "slo": "p99 under 100"}, "SLO"),
    ({"kind": "max-capacity", "slo": SLO, "p99_ms": 50.0}, "--rate and --p99-ms do not apply"),
])
def test_the_objective_refuses_what_does_not_fit_in_one_line(kwargs, said: str) -> None:
    with pytest.raises(SpecError) as caught:
        Objective(**kwargs)
    assert said in caught.value.one_line() and "\n" not in caught.value.one_line()


def test_the_race_screens_by_requests_per_second() -> None:
    objective = Objective(kind="max-capacity", slo=SLO)
    assert objective.metric.key == "rps"
    assert "the most traffic at p99<100ms,errors<0.1%" in objective.describe()
