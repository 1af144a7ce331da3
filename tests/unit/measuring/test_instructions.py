"""The instruction count's pure parts, and the probe that serves requests in-process (run
for real, without valgrind: it is the app's own Python that runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from servelab.config.load import RequestSpec
from servelab.errors import MissingToolError
from servelab.host import paths
from servelab.measuring.instructions import (
    PROBE,
    per_request,
    probe_request,
    summary_count,
    valgrind,
)

CACHEGRIND_OUT = """desc: I1 cache:
cmd: python probe.py
events: Ir
fl=???
fn=0x0000000000001100
0 5
summary: 167701280
"""


def test_summary_count_reads_the_total() -> None:
    assert summary_count(CACHEGRIND_OUT) == 167_701_280


def test_summary_count_without_a_summary_is_an_error() -> None:
    with pytest.raises(ValueError, match="summary"):
        summary_count("events: Ir\n")


def test_per_request_is_the_difference_over_the_measured_requests() -> None:
    assert per_request(1_000, 21_000, 20) == 1_000.0
    with pytest.raises(ValueError):
        per_request(1_000, 2_000, 0)


def test_missing_valgrind_is_one_line_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "find_program", lambda name: None)
    with pytest.raises(MissingToolError) as raised:
        valgrind()
    assert "valgrind" in raised.value.problem and "apt-get install valgrind" in raised.value.fix
    assert raised.value.exit_code == 3


def test_a_body_gets_its_content_type() -> None:
    asked = probe_request(RequestSpec(method="POST", path="/items/?x=1", body='{"a": 1}'))
    assert asked["headers"] == [("Content-Type", "application/json")]
    assert asked["method"] == "POST" and asked["body"] == '{"a": 1}'
    assert probe_request(RequestSpec())["headers"] == []


APPS = '''
import json

calls = {"wsgi": 0, "asgi": 0, "started": False}


def wsgi(environ, start_response):
    calls["wsgi"] += 1
    body = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))
    status = "201 Created" if environ["PATH_INFO"] == "/items" and body else "404 Not Found"
    start_response(status, [("Content-Type", "text/plain")])
    return [body]


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                calls["started"] = True
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    message = await receive()
    ok = calls["started"] and scope["query_string"] == b"q=1" and message["body"] == b"{}"
    await send({"type": "http.response.start", "status": 200 if ok else 500, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def factory():
    return wsgi
'''


@pytest.mark.parametrize(
    ("target", "interface", "factory", "path", "statuses"),
    [
        ("apps:wsgi", "wsgi", False, "/items", [201]),
        ("apps:wsgi", "wsgi", False, "/nowhere", [404]),
        ("apps:factory", "wsgi", True, "/items", [201]),
        ("apps:asgi", "asgi", False, "/items?q=1", [200]),
    ],
)
def test_the_probe_serves_the_request_in_process(
    tmp_path: Path, target: str, interface: str, factory: bool, path: str, statuses: list[int]
) -> None:
    (tmp_path / "apps.py").write_text(APPS)
    ask = {"app": target, "interface": interface, "factory": factory, "requests": 3,
           **probe_request(RequestSpec(method="POST", path=path, body="{}"))}
    done = subprocess.run([sys.executable, str(PROBE), json.dumps(ask)], cwd=tmp_path,
                          env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"statuses": statuses}
