"""The user's app and request applied to studies and experiment files (no servers started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.apps import ResolvedApp
from servelab.config.load import RequestSpec
from servelab.config.run import UserRequest
from servelab.config.stack import AppSpec, StackSpec
from servelab.errors import SpecError
from servelab.prepare.user_app import (
    check_study_accepts_app,
    fit_stack,
    request_spec,
    with_app_env,
    with_user_app,
)
from servelab.studies import StudyOptions, get_study


def test_request_options_become_a_request_spec(tmp_path: Path) -> None:
    body = tmp_path / "b.json"
    body.write_text('{"a": 1}')
    given = UserRequest(
        method="post",
        path="/x",
        headers=("X-A: 1", "Content-Type: text/plain"),
        body_file=body,
        expect_status=201,
    )
    spec = request_spec(RequestSpec(), given)
    assert (spec.method, spec.path, spec.expect_status) == ("POST", "/x", 201)
    assert spec.headers == {"X-A": "1"} and spec.content_type == "text/plain"
    assert spec.body == '{"a": 1}'
    assert not UserRequest().given and given.given


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (UserRequest(headers=("nocolon",)), "invalid --header"),
        (UserRequest(body_file=Path("/nonexistent/body")), "cannot read --body-file"),
        (UserRequest(path="x"), "must start with '/'"),
        (UserRequest(method="BREW"), "invalid request"),
    ],
)
def test_bad_request_options(request_: UserRequest, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        request_spec(RequestSpec(), request_)


def test_a_body_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    body = tmp_path / "b.bin"
    body.write_bytes(b"\xff\xfe")
    with pytest.raises(SpecError, match=r"cannot read --body-file .*can't decode"):
        request_spec(RequestSpec(), UserRequest(body_file=body))


def test_worker_class_is_fitted_to_the_app() -> None:
    seed = StackSpec(name="s", server={"kind": "gunicorn", "worker_class": "uvicorn"})
    wsgi = ResolvedApp("m:app", "wsgi", None, is_factory=False)
    fitted, note = fit_stack(seed, AppSpec(ref="m:app"), wsgi)
    assert fitted.server.worker_class == "gthread" and "uvicorn -> gthread" in note
    asgi = ResolvedApp("m:app", "asgi", None, is_factory=False)
    sync = StackSpec(name="s", server={"kind": "gunicorn", "worker_class": "sync"})
    assert fit_stack(sync, AppSpec(ref="m:app"), asgi)[0].server.worker_class == "uvicorn"
    plain = StackSpec(name="s", server={"kind": "uvicorn"})
    assert fit_stack(plain, AppSpec(ref="m:app"), wsgi)[1] == ""


def test_a_study_serves_the_django_app_with_one_workload() -> None:
    study = get_study("workers-threads").build(StudyOptions(workers=(1, 2), threads=(1, 2)))
    experiment, notes = with_user_app(
        study, AppSpec(ref="django"), UserRequest(), replace_workloads=True
    )
    assert [w.name for w in experiment.workloads] == ["app"]
    assert experiment.workloads[0].request.path == "/books/"
    assert experiment.workloads[0].load == study.workloads[0].load
    assert {s.server.worker_class for s in experiment.stacks} == {"gthread"}
    assert {s.app.ref for s in experiment.stacks} == {"django"}
    assert len(notes) == 1 + len(experiment.stacks)
    with_db = with_app_env(experiment, {"SERVELAB_DJANGO_DB": "sqlite"})
    assert all(s.app.env == {"SERVELAB_DJANGO_DB": "sqlite"} for s in with_db.stacks)


def test_only_stack_studies_take_an_app() -> None:
    check_study_accepts_app("quick", endpoints_given=False)
    check_study_accepts_app("server-shootout", endpoints_given=False)
    with pytest.raises(SpecError, match="cannot serve --app"):
        check_study_accepts_app("backlog", endpoints_given=False)
    with pytest.raises(SpecError, match="--endpoints"):
        check_study_accepts_app("quick", endpoints_given=True)


def test_a_request_mix_becomes_oha_url_file_and_other_drivers_refuse(tmp_path: Path) -> None:
    from servelab.config.load import LoadSpec
    from servelab.load.ab import AbDriver
    from servelab.load.oha import write_url_mix
    from servelab.load.wrk import WrkDriver

    mix = RequestSpec.model_validate(
        {"mix": [{"path": "/a", "weight": 4}, {"path": "/b?x=1", "weight": 2}]}
    )
    assert mix.path == "/a"
    urls = write_url_mix("http://127.0.0.1:9/a", mix, tmp_path).read_text().splitlines()
    assert urls == ["http://127.0.0.1:9/a"] * 2 + ["http://127.0.0.1:9/b?x=1"]
    load = LoadSpec(duration_s=1)
    assert "needs oha" in (AbDriver().unsupported(mix, load) or "")
    assert "needs oha" in (WrkDriver().unsupported(mix, load) or "")
    with pytest.raises(ValueError, match="must start with '/'"):
        RequestSpec.model_validate({"mix": [{"path": "a"}]})
    # One --path replaces a file's mix.
    assert request_spec(mix, UserRequest(path="/c")).mix == ()


def test_the_django_example_file_is_valid() -> None:
    from servelab.prepare.building import load_experiment

    path = Path(__file__).resolve().parents[3] / "examples" / "django-mix.toml"
    experiment = load_experiment(path)
    (workload,) = experiment.workloads
    assert [m.weight for m in workload.request.mix] == [3, 1]
    assert workload.request.path == "/books/?min=1000&max=2000"
    assert {s.app.ref for s in experiment.stacks} == {"django"}


def test_an_asgi_app_on_uwsgi_is_refused_up_front() -> None:
    asgi = ResolvedApp("m:app", "asgi", None, is_factory=False)
    stack = StackSpec(name="uwsgi-http", server={"kind": "uwsgi"})
    with pytest.raises(SpecError, match="uwsgi, which serves WSGI apps only"):
        fit_stack(stack, AppSpec(ref="m:app"), asgi)
    check_study_accepts_app("wsgi-shootout", endpoints_given=False)
