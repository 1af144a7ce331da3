"""The failure-mode studies build, and reject bad options."""

from __future__ import annotations

import pytest

from servelab.errors import SpecError
from servelab.studies import StudyOptions, get_study
from servelab.studies.failures import backlog_estimate_s


def test_failure_studies_build_and_reject_bad_options() -> None:
    backlog = get_study("backlog").build(StudyOptions())
    names = [s.name for s in backlog.stacks]
    assert names == ["unix-somaxconn-128", "unix-somaxconn-1024", "tcp-somaxconn-128-timeout-5s"]
    load = backlog.workloads[0].load
    assert (load.model, load.rate, load.requests, load.concurrency) == ("open", 200, 200, 200)
    assert backlog.stacks[0].app.env == {"SERVELAB_SLEEP_S": "2"}
    assert 10 * 60 < backlog_estimate_s(StudyOptions()) < 13 * 60
    for name in ("keepalive-mismatch", "worker-recycling", "capacity"):
        assert get_study(name).build(StudyOptions()).workloads
    with pytest.raises(SpecError, match="--sleep must be a positive"):
        get_study("backlog").build(StudyOptions(sleep_s=-1))
    with pytest.raises(SpecError, match="out of range"):
        get_study("backlog").build(StudyOptions(somaxconn=(128, 999_999)))
