"""App servers through their registry: knob errors, descriptions, missing packages."""

from __future__ import annotations

import pytest

from servelab.apps import ResolvedApp
from servelab.config.stack import ProxySpec, ServerSpec, StackSpec
from servelab.errors import SpecError
from servelab.plugins.server import get_server
from servelab.prepare.building import experiment_from_dict
from servelab.prepare.checks import describe_stack
from servelab.registry import FRONT_KINDS, SERVER_KINDS
from servelab.servers import granian, hypercorn, installed, uwsgi

ASGI = ResolvedApp("servelab.apps.seed_fastapi:app", "asgi", None, is_factory=False)

WSGI = ResolvedApp("servelab.apps.sleepy_wsgi:app", "wsgi", None, is_factory=False)


def test_commands_refuse_another_kind() -> None:
    with pytest.raises(ValueError, match="not granian"):
        granian.granian_command(ServerSpec(kind="hypercorn"), ASGI, port=1)
    with pytest.raises(ValueError, match="not hypercorn"):
        hypercorn.hypercorn_command(ServerSpec(kind="granian"), ASGI, port=1)
    with pytest.raises(ValueError, match="not uwsgi"):
        uwsgi.uwsgi_command(ServerSpec(kind="granian"), WSGI, port=1)


def test_server_not_installed_is_a_clear_error() -> None:
    with pytest.raises(SpecError, match="app server nosuchserver is not installed") as caught:
        installed.require_script("nosuchserver", "/opt/app/.venv/bin/python")
    assert caught.value.fix == "/opt/app/.venv/bin/python -m pip install nosuchserver"


def _spec_error(data: dict[str, object]) -> str:
    doc = {
        "name": "t",
        "baseline": data,
        "workloads": [{"name": "w", "load": {"requests": 10}}],
    }
    with pytest.raises(SpecError) as info:
        experiment_from_dict(doc)
    return str(info.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"server": {"kind": "hypercorn", "threads": 2}}, "hypercorn has no threads"),
        (
            {"server": {"kind": "gunicorn", "blocking_threads": 2}},
            "gunicorn has no blocking_threads setting (blocking_threads is a knob of granian)",
        ),
        (
            {"server": {"kind": "granian", "worker_class": "sync"}},
            "granian has no worker_class setting (worker_class is a knob of gunicorn)",
        ),
        ({"server": {"kind": "granian", "max_requests": 10}}, "granian has no max_requests"),
        ({"server": {"kind": "granian", "backlog": 64}}, "granian needs backlog >= 128"),
        (
            {"server": {"kind": "uwsgi", "max_requests": 9, "max_requests_jitter": 2}},
            "uwsgi has no max_requests_jitter",
        ),
        ({"server": {"kind": "waitress"}}, "kind"),
        ({"proxy": {"protocol": "uwsgi"}}, "spoken by 'uwsgi' only, not gunicorn"),
        (
            {"server": {"kind": "uwsgi"}, "proxy": {"kind": "none", "protocol": "fastcgi"}},
            "needs a front that speaks it (proxy kind 'nginx' or 'apache')",
        ),
        (
            {"server": {"kind": "uwsgi"}, "proxy": {"protocol": "uwsgi", "upstream_keepalive": 4}},
            "upstream_keepalive is measured over HTTP only",
        ),
    ],
)
def test_bad_server_knobs_are_one_line_errors(data: dict[str, object], message: str) -> None:
    text = _spec_error(data)
    assert message in text
    assert "\n" not in text.split(" (hint")[0].strip()


def test_describe_names_server_and_protocol() -> None:
    spec = StackSpec(
        server=ServerSpec(kind="uwsgi", workers=2, threads=4),
        proxy=ProxySpec(transport="unix", protocol="fastcgi"),
    )
    assert describe_stack(spec).startswith("nginx --unix/fastcgi--> uwsgi workers=2 threads=4")
    granian_spec = StackSpec(server=ServerSpec(kind="granian", blocking_threads=3))
    assert "granian workers=2 threads=1 blocking_threads=3" in describe_stack(granian_spec)


def test_every_server_and_front_with_a_process_can_be_exported() -> None:
    from servelab.plugins.front import get_front
    from servelab.registry import PROCESS_FRONTS

    assert all(get_server(kind).exportable for kind in SERVER_KINDS)
    assert all(get_front(kind).exportable for kind in PROCESS_FRONTS)


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_every_registered_server_is_what_its_line_says(kind: str) -> None:
    from servelab.plugins.server import OPTIONAL_KNOBS, AppServer

    server = get_server(kind)
    assert isinstance(server, AppServer) and server.kind == kind
    assert server.knobs <= set(OPTIONAL_KNOBS) and server.interfaces <= {"asgi", "wsgi"}
    assert server.packages, "doctor and the environment record need its package"
    if server.inside_front is not None:
        assert server.inside_front in FRONT_KINDS
    assert server.describe(ServerSpec(kind=kind)).startswith(kind)
