"""Real stacks (nginx, gunicorn, uvicorn) on loopback: they serve, they fail loudly, they go.

The autouse ``no_leftover_processes`` fixture (tests/conftest.py) checks after
every test that no process the test started is still alive.
"""

from __future__ import annotations

import gzip
import json
import shutil
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

import servelab.launch as launch_module
from servelab.apps.seed_fastapi import BIG_DOCUMENT_BYTES, make_big_document
from servelab.config.load import RequestSpec
from servelab.config.stack import AppSpec, ProxySpec, ServerSpec, StackSpec
from servelab.errors import SpecError, StackStartError
from servelab.fronts import nginx
from servelab.host.procs import ManagedProcess
from servelab.host.readiness import wait_listening, wait_ready
from servelab.host.running import RunningStack
from servelab.launch import launch_stack

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed"),
]

ITEM = {"name": "widget", "description": "a seed item", "price": 9.5, "tax": 1.25}
ITEM_PROBE = RequestSpec(method="POST", path="/async/items/", body=json.dumps(ITEM))
SLEEP_S = 0.3
GunicornUvicorn = ServerSpec(kind="gunicorn", worker_class="uvicorn", workers=2)

Check = Callable[[RunningStack], None]
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fetch(
    url: str, body: dict[str, object] | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with _OPENER.open(req, timeout=20) as response:
            return response.status, _lower(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, _lower(exc.headers.items()), exc.read()


def _lower(headers: list[tuple[str, str]]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers}


@pytest.fixture
def workdirs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every temp dir launch_stack makes during the test."""
    made: list[Path] = []
    original = launch_module._make_workdir

    def recording() -> Path:
        made.append(original())
        return made[-1]

    monkeypatch.setattr(launch_module, "_make_workdir", recording)
    return made


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port someone else (this test) is listening on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


# ------------------------------------------------------------------ serving stacks

SEED_STACKS = {
    "nginx-tcp-gunicorn": StackSpec(server=GunicornUvicorn, proxy=ProxySpec(transport="tcp")),
    "nginx-tcp-keepalive-gunicorn": StackSpec(
        server=GunicornUvicorn, proxy=ProxySpec(transport="tcp", upstream_keepalive=8)
    ),
    "nginx-unix-gunicorn": StackSpec(server=GunicornUvicorn, proxy=ProxySpec(transport="unix")),
    "nginx-unix-keepalive-gunicorn": StackSpec(
        server=GunicornUvicorn, proxy=ProxySpec(transport="unix", upstream_keepalive=8)
    ),
    "nginx-unix-uvicorn": StackSpec(
        server=ServerSpec(kind="uvicorn", workers=1), proxy=ProxySpec(transport="unix")
    ),
    "uvicorn-alone": StackSpec(server=ServerSpec(kind="uvicorn"), proxy=ProxySpec(kind="none")),
}


@pytest.mark.parametrize("name", list(SEED_STACKS))
def test_seed_endpoints(name: str, assert_stack_gone: Check) -> None:
    spec = SEED_STACKS[name]
    with launch_stack(spec, probe=ITEM_PROBE, startup_timeout_s=20) as stack:
        assert stack.base_url.startswith("http://127.0.0.1:")
        assert set(stack.processes) == ({"app"} if spec.proxy.kind == "none" else {"app", "nginx"})
        if spec.proxy.transport == "unix":
            assert (stack.workdir / "app.sock").is_socket()

        assert fetch(stack.url("/health"))[::2] == (200, b'{"status":"ok"}')
        for mode in ("sync", "async"):
            status, _, body = fetch(stack.url(f"/{mode}/items/"), ITEM)
            assert status == 200 and json.loads(body) == ITEM
        _, _, sync_big = fetch(stack.url("/sync/big_json_response/"), ITEM)
        status, headers, async_big = fetch(stack.url("/async/big_json_response/"), ITEM)
        assert status == 200 and headers["content-type"] == "application/json"
        assert sync_big == async_big
        assert 0.9 * BIG_DOCUMENT_BYTES < len(sync_big) < 1.2 * BIG_DOCUMENT_BYTES
        assert json.loads(sync_big) == make_big_document()
        # Validation errors come from the app, through the proxy.
        assert fetch(stack.url("/sync/items/"), {"name": "no price"})[0] == 422

        if spec.proxy.kind == "nginx":
            assert spec.proxy.gzip
            _, headers, packed = fetch(
                stack.url("/sync/big_json_response/"), ITEM, {"Accept-Encoding": "gzip"}
            )
            assert headers.get("content-encoding") == "gzip"
            assert gzip.decompress(packed) == sync_big
            problems = [
                line for line in stack.log_tails()["nginx"].splitlines()
                if any(level in line for level in ("[error]", "[crit]", "[alert]", "[emerg]"))
            ]
            assert not problems, "nginx logged errors on a healthy run"
            if spec.proxy.transport == "tcp":
                idle = _nginx_upstream_connections(stack)
                assert (idle > 0) == (spec.proxy.upstream_keepalive > 0), idle
    assert_stack_gone(stack)


def _nginx_upstream_connections(stack: RunningStack) -> int:
    """ESTABLISHED TCP connections nginx's workers hold to the app (kept alive ones)."""
    listen_port = int(stack.base_url.rsplit(":", 1)[1])
    master = psutil.Process(stack.processes["nginx"].pid)
    count = 0
    for worker in master.children(recursive=True):
        for conn in worker.net_connections(kind="tcp"):
            outgoing = conn.raddr and conn.laddr.port != listen_port
            if outgoing and conn.status == psutil.CONN_ESTABLISHED:
                count += 1
    return count


def test_sleepy_app_on_gunicorn_sync_serves_one_at_a_time(assert_stack_gone: Check) -> None:
    spec = StackSpec(
        app=AppSpec(ref="sleepy", env={"SERVELAB_SLEEP_S": str(SLEEP_S)}),
        server=ServerSpec(worker_class="sync", workers=1),
        proxy=ProxySpec(transport="unix"),
    )
    with launch_stack(spec, probe=RequestSpec(), startup_timeout_s=20) as stack:
        assert fetch(stack.url("/any/path"))[::2] == (200, b"ok\n")
        elapsed = _concurrent_gets(stack.url("/"), 2)
    assert_stack_gone(stack)
    assert elapsed >= 2 * SLEEP_S * 0.95, "one sync worker must serve requests one by one"


def test_gthread_threads_serve_in_parallel(assert_stack_gone: Check) -> None:
    spec = StackSpec(
        app=AppSpec(ref="sleepy", env={"SERVELAB_SLEEP_S": str(SLEEP_S)}),
        server=ServerSpec(worker_class="gthread", workers=1, threads=4),
        proxy=ProxySpec(transport="tcp"),
    )
    with launch_stack(spec, probe=RequestSpec(method="POST", body="x")) as stack:
        # Served one after another, 4 requests take at least 4 x 0.3 s, in any attempt; side
        # by side about 0.3 s. A stall of this VM (up to ~250 ms) only adds time, so the
        # fastest of up to 3 attempts is what is judged (like ping's minimum round trip).
        elapsed = []
        while len(elapsed) < 3 and min(elapsed, default=float("inf")) >= 2 * SLEEP_S:
            elapsed.append(_concurrent_gets(stack.url("/"), 4))
    assert_stack_gone(stack)
    assert min(elapsed) < 2 * SLEEP_S, f"4 threads must serve 4 requests at once: {elapsed}"


def _concurrent_gets(url: str, n: int) -> float:
    statuses: list[int] = []
    threads = [
        threading.Thread(target=lambda: statuses.append(fetch(url)[0])) for _ in range(n)
    ]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200] * n
    return time.monotonic() - start


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset is not installed")
def test_cpu_pinning_applies_to_every_process(assert_stack_gone: Check) -> None:
    spec = StackSpec(server=ServerSpec(workers=1), proxy=ProxySpec(transport="unix"))
    with launch_stack(spec, probe=ITEM_PROBE, cpus="0") as stack:
        for proc in stack.processes.values():
            tree = psutil.Process(proc.pid)
            for member in [tree, *tree.children(recursive=True)]:
                assert member.cpu_affinity() == [0], member.cmdline()
    assert_stack_gone(stack)


# ------------------------------------------------------------------ failing stacks

SERVER_ONLY_FAILURE = """
import sys
if "gunicorn" in sys.modules or "uvicorn" in sys.modules:
    raise RuntimeError("fails only inside the server: no DATABASE_URL")

def app(environ, start_response):
    start_response("200 OK", [])
    return [b""]
"""


@pytest.fixture
def user_apps(tmp_path: Path) -> Path:
    (tmp_path / "server_only.py").write_text(SERVER_ONLY_FAILURE)
    (tmp_path / "always_broken.py").write_text("raise ImportError('no such config file')\n")
    return tmp_path


@pytest.mark.parametrize(
    ("server", "proxy"),
    [
        (ServerSpec(worker_class="sync", workers=2), ProxySpec(transport="unix")),
        (ServerSpec(kind="uvicorn", workers=1), ProxySpec(kind="none")),
    ],
    ids=["nginx-gunicorn", "uvicorn-alone"],
)
def test_app_failing_inside_the_server(
    user_apps: Path, workdirs: list[Path], server: ServerSpec, proxy: ProxySpec
) -> None:
    spec = StackSpec(app=AppSpec(ref="server_only:app", app_dir=user_apps), server=server,
                     proxy=proxy)
    with pytest.raises(StackStartError) as caught, launch_stack(spec, probe=RequestSpec()):
        pytest.fail("the stack must not start")
    error = caught.value
    assert server.kind in error.problem
    assert "no DATABASE_URL" in error.detail, error.detail
    assert workdirs and not any(path.exists() for path in workdirs)


def test_app_failing_in_uvicorn_workers_times_out_with_the_error(
    user_apps: Path, workdirs: list[Path]
) -> None:
    """uvicorn --workers N restarts workers that die, so only the timeout ends the start."""
    spec = StackSpec(app=AppSpec(ref="server_only:app", app_dir=user_apps),
                     server=ServerSpec(kind="uvicorn", workers=2), proxy=ProxySpec(kind="none"))
    with (
        pytest.raises(StackStartError) as caught,
        launch_stack(spec, probe=RequestSpec(), startup_timeout_s=3),
    ):
        pytest.fail("the stack must not start")
    assert "did not answer" in caught.value.problem
    assert "no DATABASE_URL" in caught.value.detail
    assert not any(path.exists() for path in workdirs)


def test_app_failing_at_import_is_caught_before_starting(
    user_apps: Path, workdirs: list[Path]
) -> None:
    spec = StackSpec(app=AppSpec(ref="always_broken:app", app_dir=user_apps))
    with (
        pytest.raises(SpecError, match="ImportError: no such config file"),
        launch_stack(spec, probe=RequestSpec()),
    ):
        pytest.fail("the stack must not start")
    assert workdirs == []


def test_worker_class_mismatch_is_caught_before_starting(workdirs: list[Path]) -> None:
    spec = StackSpec(app=AppSpec(ref="sleepy"), server=ServerSpec(worker_class="uvicorn"))
    with pytest.raises(SpecError, match="WSGI"), launch_stack(spec, probe=RequestSpec()):
        pytest.fail("the stack must not start")
    assert workdirs == []


def test_app_server_port_taken(
    taken_port: int, workdirs: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch_module, "free_port", lambda host="127.0.0.1": taken_port)
    spec = StackSpec(server=ServerSpec(kind="uvicorn", workers=1), proxy=ProxySpec(kind="none"))
    with pytest.raises(StackStartError) as caught, launch_stack(spec, probe=ITEM_PROBE):
        pytest.fail("the stack must not start")
    assert "uvicorn exited" in caught.value.problem
    assert "address already in use" in caught.value.detail.lower()
    assert "rerun" in caught.value.fix
    assert not any(path.exists() for path in workdirs)


def test_nginx_port_taken(
    taken_port: int, workdirs: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Over a unix socket, nginx's listen port is the only TCP port the stack needs.
    monkeypatch.setattr(launch_module, "free_port", lambda host="127.0.0.1": taken_port)
    spec = StackSpec(server=ServerSpec(workers=1), proxy=ProxySpec(transport="unix"))
    with pytest.raises(StackStartError) as caught, launch_stack(spec, probe=ITEM_PROBE):
        pytest.fail("the stack must not start")
    assert "nginx exited" in caught.value.problem
    assert "Address already in use" in caught.value.detail
    assert not any(path.exists() for path in workdirs)


def test_wrong_status_names_received_and_expected(workdirs: list[Path]) -> None:
    probe = RequestSpec(path="/no/such/page", expect_status=200)
    spec = StackSpec(server=ServerSpec(workers=1))
    started = time.monotonic()
    with (
        pytest.raises(StackStartError) as caught,
        launch_stack(spec, probe=probe, startup_timeout_s=30),
    ):
        pytest.fail("the stack must not start")
    assert "HTTP 404" in caught.value.problem and "expected 200" in caught.value.problem
    # The app's settled answer is reported at once, not after the start-up timeout.
    assert time.monotonic() - started < 15
    assert not any(path.exists() for path in workdirs)


def test_nginx_t_failure_starts_nothing(
    workdirs: list[Path], monkeypatch: pytest.MonkeyPatch, no_leftover_processes: set[int]
) -> None:
    monkeypatch.setattr(nginx, "render_nginx_conf", lambda *a, **k: "bogus;\n")
    with (
        pytest.raises(StackStartError, match="nginx rejected the config"),
        launch_stack(StackSpec(), probe=ITEM_PROBE),
    ):
        pytest.fail("the stack must not start")
    assert no_leftover_processes == set(), "no server may start when nginx -t fails"
    assert not any(path.exists() for path in workdirs)


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, RuntimeError])
def test_interrupt_inside_the_block_cleans_up(
    exc_type: type[BaseException], assert_stack_gone: Check
) -> None:
    spec = StackSpec(server=ServerSpec(workers=1), proxy=ProxySpec(transport="unix"))
    running: list[RunningStack] = []
    with pytest.raises(exc_type), launch_stack(spec, probe=ITEM_PROBE) as stack:
        running.append(stack)
        raise exc_type()
    assert_stack_gone(running[0])


# ------------------------------------------------------------------ readiness alone


def _process(tmp_path: Path, code: str, name: str = "fake-server") -> ManagedProcess:
    return ManagedProcess(
        name, [sys.executable, "-c", code], log_path=tmp_path / f"{name}.log"
    ).start()


def test_wait_ready_names_the_server_that_exited(tmp_path: Path) -> None:
    proc = _process(tmp_path, "print('cannot bind: boom', flush=True); raise SystemExit(3)")
    try:
        with pytest.raises(StackStartError) as caught:
            wait_ready("http://127.0.0.1:9/", RequestSpec(), {"app": proc}, timeout_s=10)
    finally:
        proc.stop()
    assert "fake-server exited with code 3" in caught.value.problem
    assert "cannot bind: boom" in caught.value.detail


def test_wait_ready_times_out_without_an_answer(tmp_path: Path, taken_port: int) -> None:
    """A server that accepts but never answers: the timeout holds, the error says so."""
    proc = _process(tmp_path, "import time; time.sleep(60)")
    start = time.monotonic()
    try:
        with pytest.raises(StackStartError) as caught:
            wait_ready(f"http://127.0.0.1:{taken_port}/", RequestSpec(), {"app": proc}, 0.5)
        with pytest.raises(StackStartError, match="did not answer connect"):
            wait_listening(tmp_path / "nothing.sock", {"app": proc}, 0.3)
    finally:
        proc.stop()
    assert time.monotonic() - start < 5
    assert "did not answer the readiness request GET" in caught.value.problem
