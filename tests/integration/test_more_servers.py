"""granian, hypercorn and uWSGI launched for real: alone and behind nginx (tcp, unix;
for uWSGI also the uwsgi protocol and FastCGI), serving the reference apps.

The autouse ``no_leftover_processes`` fixture (tests/conftest.py) checks after
every test that no process the test started is still alive.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from servelab.apps.seed_fastapi import BIG_DOCUMENT_BYTES
from servelab.config.load import RequestSpec
from servelab.config.stack import AppSpec, ProxySpec, ServerSpec, StackSpec
from servelab.errors import SpecError
from servelab.host.procs import group_members
from servelab.host.running import RunningStack
from servelab.launch import launch_stack

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed"),
]

Check = Callable[[RunningStack], None]
ITEM = {"name": "widget", "description": "a seed item", "price": 9.5, "tax": 1.25}
ITEM_PROBE = RequestSpec(method="POST", path="/async/items/", body=json.dumps(ITEM))
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fetch(url: str, body: dict[str, object] | None = None) -> tuple[int, dict[str, str], bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with _OPENER.open(req, timeout=20) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(exc.headers.items()), exc.read()

ASGI_SERVERS = {
    "granian": ServerSpec(kind="granian", workers=2, threads=1, blocking_threads=1),
    "hypercorn": ServerSpec(kind="hypercorn", workers=2),
}
FRONTS = {
    "alone": ProxySpec(kind="none"),
    "nginx-tcp": ProxySpec(transport="tcp"),
    "nginx-unix": ProxySpec(transport="unix"),
}


@pytest.mark.parametrize("front", list(FRONTS))
@pytest.mark.parametrize("server", list(ASGI_SERVERS))
def test_asgi_server_serves_seed_endpoints(
    server: str, front: str, assert_stack_gone: Check
) -> None:
    spec = StackSpec(server=ASGI_SERVERS[server], proxy=FRONTS[front])
    with launch_stack(spec, probe=ITEM_PROBE, startup_timeout_s=20) as stack:
        if spec.proxy.transport == "unix":
            assert (stack.workdir / "app.sock").is_socket()
        for mode in ("sync", "async"):
            status, _, body = fetch(stack.url(f"/{mode}/items/"), ITEM)
            assert status == 200 and json.loads(body) == ITEM
            status, _, big = fetch(stack.url(f"/{mode}/big_json_response/"), ITEM)
            assert status == 200 and 0.9 * BIG_DOCUMENT_BYTES < len(big) < 1.2 * BIG_DOCUMENT_BYTES
        assert fetch(stack.url("/sync/items/"), {"name": "no price"})[0] == 422
        # The master plus its workers run (each server forks its own).
        assert len(group_members(stack.processes["app"].pid)) >= 1 + spec.server.workers
    assert_stack_gone(stack)


SLEEPY = AppSpec(ref="sleepy", env={"SERVELAB_SLEEP_S": "0.01"})
WSGI_STACKS = {
    "uwsgi-alone": StackSpec(
        app=SLEEPY, server=ServerSpec(kind="uwsgi", workers=2, threads=2),
        proxy=ProxySpec(kind="none"),
    ),
    "nginx-tcp-uwsgi-http": StackSpec(
        app=SLEEPY, server=ServerSpec(kind="uwsgi", workers=2), proxy=ProxySpec(transport="tcp"),
    ),
    "nginx-unix-uwsgi-protocol": StackSpec(
        app=SLEEPY, server=ServerSpec(kind="uwsgi", workers=2, threads=2),
        proxy=ProxySpec(transport="unix", protocol="uwsgi"),
    ),
    "nginx-tcp-uwsgi-protocol": StackSpec(
        app=SLEEPY, server=ServerSpec(kind="uwsgi", workers=1),
        proxy=ProxySpec(transport="tcp", protocol="uwsgi"),
    ),
    "nginx-unix-uwsgi-fastcgi": StackSpec(
        app=SLEEPY, server=ServerSpec(kind="uwsgi", workers=2),
        proxy=ProxySpec(transport="unix", protocol="fastcgi"),
    ),
    "nginx-unix-granian-wsgi": StackSpec(
        app=SLEEPY, server=ServerSpec(kind="granian", workers=1, blocking_threads=2),
        proxy=ProxySpec(transport="unix"),
    ),
    "hypercorn-wsgi-alone": StackSpec(
        app=SLEEPY, server=ServerSpec(kind="hypercorn", workers=1), proxy=ProxySpec(kind="none"),
    ),
}


@pytest.mark.parametrize("name", list(WSGI_STACKS))
def test_wsgi_stacks_serve_sleepy_app(name: str, assert_stack_gone: Check) -> None:
    spec = WSGI_STACKS[name]
    probe = RequestSpec(method="POST", path="/some/path?q=1", body="payload")
    with launch_stack(spec, probe=probe, startup_timeout_s=20) as stack:
        assert fetch(stack.url("/any/path?x=1"))[::2] == (200, b"ok\n")
        assert fetch(stack.url("/post"), {"a": 1})[::2] == (200, b"ok\n")
        if spec.proxy.kind == "nginx":
            problems = [
                line for line in stack.log_tails()["nginx"].splitlines()
                if any(level in line for level in ("[error]", "[crit]", "[alert]", "[emerg]"))
            ]
            assert not problems
    assert_stack_gone(stack)


def test_uwsgi_refuses_asgi_app_before_starting() -> None:
    spec = StackSpec(server=ServerSpec(kind="uwsgi"), proxy=ProxySpec(transport="unix"))
    with (
        pytest.raises(SpecError, match="uwsgi serves WSGI apps only"),
        launch_stack(spec, probe=ITEM_PROBE),
    ):
        pass


@pytest.mark.parametrize("kind", ["granian", "hypercorn", "uwsgi"])
def test_sigterm_stops_the_server_well_within_the_grace_period(
    kind: str, assert_stack_gone: Check
) -> None:
    """SIGTERM to the group ends master and workers by themselves, before ManagedProcess's
    SIGKILL at 5 s (granian may take its own 3 s workers-kill-timeout)."""
    spec = StackSpec(
        app=SLEEPY, server=ServerSpec(kind=kind, workers=2), proxy=ProxySpec(kind="none")  # type: ignore[arg-type]
    )
    with launch_stack(spec, probe=RequestSpec(), startup_timeout_s=20) as stack:
        app = stack.processes["app"]
        start = time.monotonic()
        app.stop()
        took = time.monotonic() - start
    assert_stack_gone(stack)
    # Judged by how the master ended, not by the clock (a stall of this VM only adds time):
    # had it outlived the grace period, stop() would have killed it (exit status -9).
    assert app.exit_code() != -signal.SIGKILL, f"{kind} needed SIGKILL after {took:.1f} s"
