"""How a study is fitted to the machine before it is measured (pure: planned CPUs)."""

from __future__ import annotations

import pytest

from servelab.api import build_study
from servelab.config.run import RunOptions
from servelab.host.cpus import default_cpu_plan
from servelab.studies import StudyOptions, get_study
from servelab.studies.seeds import QUICK_DURATION_S, QUICK_IN_TURNS_DURATION_S


def machine(n: int):
    return default_cpu_plan(frozenset(range(n)))


@pytest.mark.parametrize("cpus", [2, 4])
def test_quick_goes_in_turns_where_its_stacks_would_share_cpus(cpus):
    quick = get_study("quick")
    experiment, options = build_study(quick, StudyOptions(), RunOptions(), machine(cpus))
    assert not experiment.side_by_side
    assert {w.load.duration_s for w in experiment.workloads} == {QUICK_IN_TURNS_DURATION_S}
    assert experiment.warmup.duration_s == 0.5
    (note,) = options.notes
    assert "in turns" in note and "--side-by-side" in note


@pytest.mark.parametrize("cpus", [8, 16, 64])
def test_quick_stays_side_by_side_where_each_stack_gets_cpus_of_its_own(cpus):
    quick = get_study("quick")
    experiment, options = build_study(quick, StudyOptions(), RunOptions(), machine(cpus))
    assert experiment.side_by_side and options.notes == ()
    assert {w.load.duration_s for w in experiment.workloads} == {QUICK_DURATION_S}


@pytest.mark.parametrize(("asked", "side_by_side"), [(True, True), (False, False)])
def test_an_explicit_choice_is_kept_on_any_machine(asked, side_by_side):
    for cpus in (2, 16):
        experiment, options = build_study(
            get_study("quick"), StudyOptions(), RunOptions(side_by_side=asked), machine(cpus)
        )
        assert experiment.side_by_side is side_by_side and options.notes == ()


def test_a_study_measured_in_turns_anyway_gets_no_note():
    experiment, options = build_study(
        get_study("port-vs-socket"), StudyOptions(), RunOptions(), machine(2)
    )
    assert not experiment.side_by_side and options.notes == ()


def check_of(**kwargs):
    from servelab.check import CheckSpec, check_experiment
    from servelab.config.stack import AppSpec

    return check_experiment(CheckSpec(app=AppSpec(ref="fastapi"), **kwargs), None)


@pytest.mark.parametrize(("cpus", "in_turns"), [(2, True), (4, True), (16, False), (64, False)])
def test_check_follows_the_same_rule_as_quick(cpus, in_turns):
    """The two versions of `servelab check` share CPUs side by side on small machines,
    where a slowdown of a cheap request would read smaller than it is."""
    from servelab.api import in_turns_because

    note = in_turns_because(check_of(), RunOptions(), machine(cpus))
    assert (note is not None) is in_turns
    if note:
        assert "the 2 stacks" in note and "--side-by-side" in note
    assert in_turns_because(check_of(), RunOptions(side_by_side=True), machine(cpus)) is None


def test_check_in_turns_takes_as_long_a_round_as_side_by_side():
    from servelab.check import IN_TURNS_DURATION_S, SIDE_BY_SIDE_DURATION_S, CheckSpec
    from servelab.check import check_experiment as build
    from servelab.config.stack import AppSpec

    def durations(experiment):
        return {w.load.duration_s for w in experiment.workloads}

    spec = CheckSpec(app=AppSpec(ref="fastapi"))
    apart = build(spec, None, side_by_side=False)
    assert not apart.side_by_side and durations(apart) == {IN_TURNS_DURATION_S}
    assert durations(build(spec, None)) == {SIDE_BY_SIDE_DURATION_S}
    assert 2 * IN_TURNS_DURATION_S == SIDE_BY_SIDE_DURATION_S
    given = CheckSpec(app=AppSpec(ref="fastapi"), duration_s=4.0)
    assert durations(build(given, None, side_by_side=False)) == {4.0}


@pytest.mark.parametrize("cpus", [2, 16])
def test_quick_is_built_once_whichever_way_it_goes(cpus, monkeypatch):
    """The choice is made of quick's stacks before it is built (it once built side by side,
    then again in turns on small machines)."""
    import servelab.studies.seeds as seeds

    built = []
    real = seeds.experiment_from_dict
    monkeypatch.setattr(
        seeds, "experiment_from_dict", lambda data, **kw: built.append(data) or real(data, **kw)
    )
    quick = get_study("quick")
    experiment, options = build_study(quick, StudyOptions(), RunOptions(), machine(cpus))
    assert len(built) == 1
    assert experiment.side_by_side is (cpus == 16) and len(options.notes) == (cpus == 2)
