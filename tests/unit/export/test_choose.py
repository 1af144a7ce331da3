"""servelab export: which variant is chosen, and why, with the numbers behind it."""

from __future__ import annotations

import pytest

from servelab.errors import ServelabError
from servelab.export.choose import NoClearWinnerError, choose_variant, rank
from servelab.export.deploy import render_deploy_set
from servelab.export.layout import DeployLayout
from servelab.report.base import ReportInput
from servelab.results.records import RunRecord

from .common import QUICK, SLEEPY, load


def test_best_is_the_fastest_significantly_better_variant_without_errors() -> None:
    choice = choose_variant(load(SLEEPY), "best", source="sleepy")
    assert choice.name == "gthread-2x4-unix-keepalive"
    assert choice.how == "best"
    assert "better, +483.8 % (p = 0.045)" in choice.reason
    assert "next best: sync-4-unix, +298.7 %" in choice.reason
    assert [c.variant for c in choice.candidates] == [
        "gthread-2x4-unix-keepalive",
        "sync-4-unix",
    ]
    assert all(c.eligible for c in choice.candidates)


def test_a_variant_with_failed_requests_is_never_best() -> None:
    report = load(SLEEPY)
    runs = []
    for run in report.runs:
        if run.variant == "gthread-2x4-unix-keepalive" and run.repetition == 2:
            load_ = run.load.model_copy(update={"status_counts": {"200": 100, "502": 3}})
            run = RunRecord.model_validate({**run.model_dump(), "load": load_.model_dump()})
        runs.append(run)
    broken = ReportInput.build(report.experiment, report.environment, runs)
    choice = choose_variant(broken, "best")
    assert choice.name == "sync-4-unix"
    gthread = next(c for c in rank(broken) if c.variant == "gthread-2x4-unix-keepalive")
    assert not gthread.eligible
    assert gthread.reason.startswith("3 of ") and "HTTP 502: 3" in gthread.reason


def test_no_clear_winner_says_why_for_every_variant() -> None:
    with pytest.raises(NoClearWinnerError) as caught:
        choose_variant(load(QUICK), "best", source="result #7")
    error = caught.value
    assert error.problem.startswith("no clear winner in result #7")
    assert "--variant NAME (nginx-tcp, nginx-unix, nginx-unix-keepalive)" in error.fix
    assert "- nginx-unix: not significantly faster than the baseline on any workload" in (
        error.detail
    )
    assert "sync-small: no significant difference, +47.1 % (p = 0.26)" in error.detail


def test_a_variant_by_name_and_a_missing_one() -> None:
    choice = choose_variant(load(QUICK), "nginx-unix")
    assert choice.name == "nginx-unix" and choice.how == "named"
    with pytest.raises(ServelabError) as caught:
        choose_variant(load(QUICK), "nginx-udp", source="result #7")
    assert caught.value.problem == "no variant 'nginx-udp' in result #7"
    assert "nginx-tcp, nginx-unix, nginx-unix-keepalive" in caught.value.fix


def test_single_knob_neighbours_justify_the_choice_with_numbers() -> None:
    report = load(QUICK)
    deploy = render_deploy_set(
        report, choose_variant(report, "nginx-unix"), DeployLayout("webapp"), source="r"
    )
    readme = deploy.files["README.md"]
    # nginx-tcp differs from nginx-unix only in the transport; keepalive-8 only in keepalive.
    assert "Against `nginx-tcp` (proxy.transport = tcp, all else equal)" in readme
    assert "- sync-small: 1,799.3 vs 1,222.8 requests/s (+47.1 %), no significant difference" in (
        readme
    )
    assert "Against `nginx-unix-keepalive` (proxy.upstream_keepalive = 8, all else equal)" in (
        readme
    )
