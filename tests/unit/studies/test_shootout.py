"""The server shootouts' plans."""

from __future__ import annotations

from servelab.studies import StudyOptions, get_study


def test_server_shootout_study() -> None:
    exp = get_study("server-shootout").build(StudyOptions(duration_s=2, workers=(3,)))
    assert [s.server.kind for s in exp.stacks] == ["gunicorn", "uvicorn", "granian", "hypercorn"]
    assert {s.server.workers for s in exp.stacks} == {3}
    assert {s.proxy.transport for s in exp.stacks} == {"unix"}
    assert {s.server.backlog for s in exp.stacks} == {128}
    assert len(exp.workloads) == 4


def test_wsgi_shootout_study() -> None:
    exp = get_study("wsgi-shootout").build(StudyOptions(sleep_s=0.02, workers=(3,)))
    assert [(s.server.kind, s.proxy.protocol) for s in exp.stacks] == [
        ("gunicorn", "http"), ("granian", "http"),
        ("uwsgi", "http"), ("uwsgi", "uwsgi"), ("uwsgi", "fastcgi"),
    ]
    assert {s.server.workers for s in exp.stacks} == {3}
    assert {s.app.ref for s in exp.stacks} == {"sleepy"}
    assert {s.app.env["SERVELAB_SLEEP_S"] for s in exp.stacks} == {"0.02"}
    assert exp.stacks[0].server.worker_class == "sync"
    default = get_study("wsgi-shootout").build(StudyOptions())
    assert default.stacks[0].app.env["SERVELAB_SLEEP_S"] == "0"
    assert default.workloads[0].load.duration_s == 5.0
