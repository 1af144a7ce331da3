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
