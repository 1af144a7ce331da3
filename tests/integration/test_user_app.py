"""The user's own app through the CLI, for real: `--app` on a study and on a run."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

WSGI_APP = """
def app(environ, start_response):
    if environ["PATH_INFO"] == "/missing":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"no such thing"]
    body = environ["REQUEST_METHOD"].encode()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]
"""

# A factory; answers 201 only to a POST that carries the header and a body.
ASGI_APP = """
def create_app():
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = dict(scope["headers"])
        ok = scope["method"] == "POST" and headers.get(b"x-token") == b"t0k" and body
        await send({"type": "http.response.start", "status": 201 if ok else 400,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": body})
    return app
"""

EXPERIMENT = """
name = "mine"
repetitions = 1
[warmup]
requests = 20
max_rounds = 1
[baseline]
server = { kind = "gunicorn", worker_class = "sync", workers = 1 }
proxy = { kind = "nginx", transport = "unix" }
[[workloads]]
name = "root"
load = { concurrency = 4, duration_s = 1 }
"""


def servelab(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "servelab", *args],
        capture_output=True, text=True, timeout=180, cwd=cwd,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    package = tmp_path / "apps" / "mine"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "wsgi.py").write_text(textwrap.dedent(WSGI_APP))
    (package / "asgi.py").write_text(textwrap.dedent(ASGI_APP))
    (package / "broken.py").write_text('raise RuntimeError("DATABASE_URL is not set")\n')
    return tmp_path / "apps"


def runs_of(out: Path) -> list[dict]:
    (runs_file,) = out.glob("*/runs.jsonl")
    return [json.loads(line) for line in runs_file.read_text().splitlines()]


def test_asgi_factory_on_a_study_with_the_users_request(app_dir: Path, tmp_path: Path) -> None:
    body = tmp_path / "body.json"
    body.write_text('{"name": "x"}')
    out = tmp_path / "out"
    code, _, stderr = servelab(
        "study", "keepalive", "--app", "mine.asgi:create_app", "--app-dir", str(app_dir),
        "--method", "POST", "--path", "/items", "--header", "X-Token: t0k",
        "--body-file", str(body), "--expect-status", "201",
        "-r", "1", "-d", "1", "-c", "4", "--warmup", "20", "--results", str(out),
    )
    assert code == 0, stderr
    assert "ASGI factory" in stderr
    runs = runs_of(out)
    assert {(r["variant"], r["workload"]) for r in runs} == {
        ("no-keepalive", "app"), ("keepalive-8", "app")}
    for run in runs:
        assert run["load"]["status_counts"] == {"201": run["load"]["requests_total"]}


def test_wsgi_app_gets_a_wsgi_worker_class_on_study_and_run(app_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, _, stderr = servelab(
        "study", "gunicorn-vs-uvicorn", "--app", "mine.wsgi:app", "--app-dir", str(app_dir),
        "-r", "1", "-d", "1", "-c", "4", "--warmup", "20", "--results", str(out),
    )
    assert code == 0, stderr
    assert "gunicorn worker class uvicorn -> gthread" in stderr
    runs = runs_of(out)
    assert {r["variant"] for r in runs} == {"gunicorn", "uvicorn"}
    assert all(r["load"]["status_counts"].get("200") == r["load"]["requests_total"] for r in runs)

    toml = tmp_path / "mine.toml"
    toml.write_text(EXPERIMENT)
    out2 = tmp_path / "out2"
    code, _, stderr = servelab(
        "run", str(toml), "--app", "mine.wsgi:app", "--app-dir", str(app_dir),
        "--method", "PUT", "--results", str(out2),
    )
    assert code == 0, stderr
    (run,) = runs_of(out2)
    assert run["workload"] == "root"
    assert run["load"]["status_counts"] == {"200": run["load"]["requests_total"]}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("nowhere.app:app", "No module named 'nowhere'"),
        ("mine.wsgi:nope", "module 'mine.wsgi' has no attribute 'nope'"),
        ("mine.broken:app", "RuntimeError: DATABASE_URL is not set"),
    ],
)
def test_an_app_that_cannot_be_imported_is_one_line(
    app_dir: Path, tmp_path: Path, ref: str, message: str
) -> None:
    code, _, stderr = servelab(
        "study", "quick", "--app", ref, "--app-dir", str(app_dir), "-r", "1", "-d", "1",
        "--results", str(tmp_path / "out"),
    )
    assert code == 2
    first, *rest = stderr.strip().splitlines()
    assert first.startswith("servelab: error: cannot use app") and message in first
    assert "Traceback" not in stderr and len(rest) <= 1
    assert not (tmp_path / "out").exists()


def test_a_wrong_status_stops_before_measuring(app_dir: Path, tmp_path: Path) -> None:
    code, _, stderr = servelab(
        "study", "quick", "--app", "mine.wsgi:app", "--app-dir", str(app_dir),
        "--path", "/missing", "--startup-timeout", "3", "-r", "1", "-d", "1",
        "--results", str(tmp_path / "out"),
    )
    assert code == 4
    (first,) = [line for line in stderr.splitlines() if line.startswith("servelab: error:")]
    assert "before measuring, GET /missing" in first and "HTTP 404, expected 200" in first
    assert "the app said: no such thing" in first
    assert not (tmp_path / "out").exists()


MIX_APP = """
import os


def app(environ, start_response):
    with open(os.environ["MIX_LOG"], "a") as log:
        log.write(environ["PATH_INFO"] + "\\n")
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
"""


def test_a_weighted_request_mix_from_an_experiment_file(app_dir: Path, tmp_path: Path) -> None:
    (app_dir / "mine" / "mixapp.py").write_text(textwrap.dedent(MIX_APP))
    log = tmp_path / "paths.log"
    toml = tmp_path / "mix.toml"
    toml.write_text(textwrap.dedent(f"""
        name = "mix"
        repetitions = 1
        [warmup]
        requests = 0
        [baseline.app]
        ref = "mine.mixapp:app"
        app_dir = "{app_dir}"
        env = {{ MIX_LOG = "{log}" }}
        [baseline.server]
        kind = "gunicorn"
        worker_class = "sync"
        workers = 1
        [[workloads]]
        name = "mixed"
        request = {{ mix = [{{ path = "/a", weight = 3 }}, {{ path = "/b", weight = 1 }}] }}
        load = {{ concurrency = 4, requests = 800 }}
    """))
    code, _, stderr = servelab("run", str(toml), "--results", str(tmp_path / "out"))
    assert code == 0, stderr
    (run,) = runs_of(tmp_path / "out")
    assert run["load"]["status_counts"] == {"200": 800}
    paths = log.read_text().split()
    measured = paths[-800:]  # the readiness probe came first
    share_a = measured.count("/a") / len(measured)
    assert set(measured) == {"/a", "/b"} and 0.68 < share_a < 0.82
