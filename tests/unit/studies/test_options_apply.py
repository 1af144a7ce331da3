"""Each study declares which failure-mode options it reads (``Study.reads``); the
declaration is checked against what its build does, and the rest are refused."""

from __future__ import annotations

import dataclasses

import pytest

from servelab.errors import SpecError
from servelab.studies import (
    FAILURE_OPTIONS,
    StudyOptions,
    all_studies,
    check_options_apply,
    get_study,
)

# A value for each option that differs from every study's own default.
GIVEN = {"rate": 37.0, "sleep_s": 0.123, "somaxconn": (256,), "netns": "off", "timeout_s": 7.5}


@pytest.mark.parametrize("name", sorted(all_studies()))
def test_a_study_reads_exactly_the_options_it_declares(name):
    study = get_study(name)
    plain = study.build(StudyOptions()).model_dump()
    for option in FAILURE_OPTIONS:
        changed = study.build(StudyOptions(**{option: GIVEN[option]})).model_dump() != plain
        assert changed == (option in study.reads), (name, option)


def test_an_option_the_study_does_not_read_is_refused_naming_those_that_do():
    with pytest.raises(SpecError) as info:
        check_options_apply(get_study("port-vs-socket"), StudyOptions(rate=100.0))
    assert info.value.one_line() == (
        "--rate does not apply to study 'port-vs-socket' (fix: drop --rate, or use it with "
        "backlog, worker-recycling, capacity)"
    )


def test_options_a_study_reads_pass():
    study = get_study("backlog")
    check_options_apply(study, dataclasses.replace(StudyOptions(), **GIVEN))
