"""A check on instruction counts: which checks count, and how counts compare."""

from __future__ import annotations

import pytest

from servelab.check import CheckSpec, check_experiment, parse_thresholds
from servelab.check.instructions import count_comparison, counted
from servelab.config.stack import AppSpec
from servelab.errors import SpecError
from servelab.prepare.building import experiment_from_dict


def test_a_check_counts_when_every_threshold_is_on_instructions() -> None:
    assert counted(parse_thresholds(["instructions > +5%"]))
    assert not counted(parse_thresholds(["rps < -5%", "errors > 0"]))


def test_instructions_mixed_with_load_thresholds_is_one_line() -> None:
    with pytest.raises(SpecError) as raised:
        counted(parse_thresholds(["instructions > +5%", "rps < -5%"]))
    assert "cannot be mixed" in raised.value.problem and "two checks" in raised.value.fix


def test_instructions_need_a_percentage() -> None:
    with pytest.raises(SpecError, match="give a percentage"):
        parse_thresholds(["instructions > 5"])


def test_counts_that_never_move_are_exact() -> None:
    found = count_comparison([1000.0, 1000.0], [1100.0, 1100.0])
    assert found.interval_pct == pytest.approx((10.0, 10.0))
    assert found.difference_pct == pytest.approx(10.0)
    assert found.starts == (2, 2)


def test_counts_that_move_get_welch_interval() -> None:
    found = count_comparison([1000.0, 1002.0, 998.0], [1100.0, 1101.0, 1099.0])
    low, high = found.interval_pct
    assert low < 10.0 < high and high - low < 2.0


def test_counts_that_move_on_one_side_only_still_get_an_interval() -> None:
    found = count_comparison([1000.0, 1000.0], [1100.0, 1102.0])
    assert found.interval_pct is not None


def test_a_study_cannot_stop_on_instructions() -> None:
    with pytest.raises(SpecError, match="counted with no load"):
        experiment_from_dict({
            "name": "x", "baseline": {"name": "a"}, "variants": [],
            "workloads": [{"name": "w", "request": {"path": "/"}}],
            "stopping": {"thresholds": ["instructions > +5%"]},
        }, source="test")


def test_the_check_experiment_leaves_counted_thresholds_out() -> None:
    spec = CheckSpec(app=AppSpec(ref="sleepy"), thresholds=("instructions > +5%",))
    assert check_experiment(spec, None).stopping.thresholds == ()


def test_a_check_on_instructions_is_not_said_to_run_in_turns() -> None:
    """No stack runs, so the machine's CPUs decide nothing; a load check on one CPU for
    its stacks is measured in turns, and says so."""
    from servelab.check import measuring_options
    from servelab.config.run import RunOptions

    one_cpu = RunOptions(stack_cpus="0", driver_cpus="1")
    counting = CheckSpec(app=AppSpec(ref="sleepy"), thresholds=("instructions > +5%",))
    assert measuring_options(counting, one_cpu) is one_cpu
    driving = CheckSpec(app=AppSpec(ref="sleepy"), thresholds=("rps < -5%",))
    in_turns = measuring_options(driving, one_cpu)
    assert in_turns.side_by_side is False
    assert in_turns.notes[-1].startswith("measuring in turns: the stack CPUs (0)")
    mixed = CheckSpec(app=AppSpec(ref="sleepy"), thresholds=("instructions > +5%", "p99 > +5%"))
    with pytest.raises(SpecError):
        measuring_options(mixed, one_cpu)
