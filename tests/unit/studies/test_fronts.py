"""The apache-vs-nginx study's plan and the ab "Time per request" section."""

import pytest
from support import seed_run as run

from servelab.errors import SpecError
from servelab.prepare.building import experiment_from_dict
from servelab.report.markdown import render_markdown
from servelab.report.sections import live_sections
from servelab.report.timing import time_per_request_rows
from servelab.studies import StudyOptions, get_study


def build(**options):
    return get_study("apache-vs-nginx").build(StudyOptions(**options))


def test_the_seed_loads_on_three_stacks_with_the_same_pool_and_a_slow_database():
    exp = build()
    assert exp.driver == "ab"
    assert [(w.name, w.load.requests, w.load.concurrency) for w in exp.workloads] == [
        ("ab-c20", 1000, 20),
        ("ab-c500", 3000, 500),
    ]
    fronts = {s.name: (s.proxy.kind, s.server.kind) for s in exp.stacks}
    assert fronts == {
        "apache-mod_wsgi": ("apache", "mod_wsgi"),
        "nginx-fastcgi": ("nginx", "uwsgi"),
        "nginx-gunicorn": ("nginx", "gunicorn"),
    }
    assert exp.baseline.proxy.apache_mpm == "worker"
    assert exp.variants[0].proxy.protocol == "fastcgi"
    assert {(s.server.workers, s.server.threads) for s in exp.stacks} == {(2, 8)}
    assert all(s.app.ref == "django" for s in exp.stacks)
    assert exp.database is not None and exp.database.kind == "postgresql"
    assert exp.database.latency_ms == 10 and exp.database.jitter_ms == 3


def test_pool_and_repetitions_follow_the_options():
    exp = build(workers=(4,), threads=(2,), repetitions=5, driver="oha")
    assert {(s.server.workers, s.server.threads) for s in exp.stacks} == {(4, 2)}
    assert exp.repetitions == 5 and exp.driver == "oha"


@pytest.mark.parametrize(
    ("option", "flag"),
    [({"concurrency": 10}, "--concurrency"), ({"duration_s": 2.0}, "--duration")],
)
def test_load_options_are_refused_not_ignored(option, flag):
    with pytest.raises(SpecError, match=flag):
        build(**option)


AB_EXPERIMENT = experiment_from_dict(
    {
        "name": "ab",
        "driver": "ab",
        "baseline": {"name": "tcp"},
        "workloads": [{"name": "sync-small", "load": {"requests": 5000, "concurrency": 20}}],
    }
)


def test_time_per_request_is_what_ab_prints():
    # 5000 requests at 1250 req/s: 4 s; ab prints 20 x 4000 / 5000 = 16 ms and 0.8 ms.
    runs = [run("tcp", 1, 1250.0, 15.5), run("tcp", 2, 1000.0, 19.0, errors=3)]
    (row,) = time_per_request_rows(AB_EXPERIMENT, runs)
    assert row.runs == 2
    assert row.across_all_ms == pytest.approx((0.8 + 1.0) / 2)
    assert row.mean_ms == pytest.approx(20 * (0.8 + 1.0) / 2)
    assert row.latency_ms == pytest.approx((15.5 + 19.0) / 2)
    assert row.failed == 3
    report = render_markdown(live_sections(AB_EXPERIMENT, {}, runs))
    assert "## Time per request (as ab prints it)" in report
    assert "| sync-small | tcp" in report


def test_no_ab_section_for_other_drivers():
    oha = AB_EXPERIMENT.model_copy(update={"driver": "oha"})
    oha_report = render_markdown(live_sections(oha, {}, [run("tcp", 1, 1250.0, 15.5)]))
    assert "as ab prints it" not in oha_report


def test_the_apache_mpms_example_file_is_valid():
    from pathlib import Path

    from servelab.prepare.building import load_experiment

    path = Path(__file__).resolve().parents[3] / "examples" / "apache-mpms.toml"
    exp = load_experiment(path)
    assert [s.proxy.apache_mpm for s in exp.stacks] == [
        "event", "worker", "prefork", "event", "event",
    ]
    assert exp.stacks[-1].server.kind == "mod_wsgi"
    assert exp.baseline.app.env == {"SERVELAB_SLEEP_S": "0"}
