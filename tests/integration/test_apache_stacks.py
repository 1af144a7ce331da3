"""Apache httpd launched for real: each MPM proxying to gunicorn over TCP and a unix socket,
to uWSGI over FastCGI and the uwsgi protocol, and mod_wsgi daemon mode serving the sleepy
WSGI app and the Django app on SQLite; plus the bad inputs, refused before anything runs.

Besides the autouse ``no_leftover_processes`` check (tests/conftest.py), every test that
starts Apache checks that none of its processes, and nothing of its temp dir, is left.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from servelab.config.load import RequestSpec
from servelab.config.stack import AppSpec, ProxySpec, ServerSpec, StackSpec
from servelab.errors import MissingToolError, SpecError
from servelab.fronts import apache, apache_conf, apache_user
from servelab.host.running import RunningStack
from servelab.launch import launch_stack
from servelab.observe.attribution import LogCursor
from servelab.observe.metrics import ProcessSampler

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        shutil.which("apache2") is None and not apache.FALLBACK_BINARY.exists(),
        reason="apache2 is not installed",
    ),
]

Check = Callable[[RunningStack], None]
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
SLEEPY = AppSpec(ref="sleepy", env={"SERVELAB_SLEEP_S": "0.01"})
GUNICORN = ServerSpec(kind="gunicorn", worker_class="sync", workers=2)


def fetch(url: str, body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    try:
        with _OPENER.open(urllib.request.Request(url, data=body), timeout=20) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(exc.headers.items()), exc.read()


def apache_processes(workdir: Path) -> list[psutil.Process]:
    """Live Apache processes (mod_wsgi's daemons included) run on ``workdir``'s config."""
    conf = str(workdir / apache_conf.CONF_NAME)
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and conf in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


def log_problems(stack: RunningStack) -> list[str]:
    text = (stack.workdir / apache_conf.LOG_NAME).read_text()
    return [line for line in text.splitlines() if any(
        f":{level}]" in line for level in ("error", "crit", "alert", "emerg", "warn")
    )]


@pytest.fixture
def apache_gone(assert_stack_gone: Check) -> Iterator[Check]:
    """assert_stack_gone, plus: no Apache process of the stack, no temp dir left."""
    tmp = Path(tempfile.gettempdir())
    before = {p for p in os.listdir(tmp) if p.startswith("servelab-")}

    def check(stack: RunningStack) -> None:
        assert_stack_gone(stack)
        assert not apache_processes(stack.workdir)
        after = {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("servelab-")}
        assert stack.workdir.name not in after
        # Other people's stacks may come and go meanwhile; none of ours may stay.
        ours = [p for p in after - before if (tmp / p / apache_conf.CONF_NAME).exists()]
        assert not ours, f"Apache temp dirs left: {ours}"

    yield check


PROXIED = {
    f"{mpm}-{transport}": StackSpec(
        app=SLEEPY,
        server=GUNICORN,
        proxy=ProxySpec(
            kind="apache", mpm=mpm, transport=transport,  # type: ignore[arg-type]
            upstream_keepalive=4 if transport == "unix" else 0,
        ),
    )
    for mpm in ("prefork", "worker", "event")
    for transport in ("tcp", "unix")
}
PROXIED["event-tcp-uwsgi-fastcgi"] = StackSpec(
    app=SLEEPY, server=ServerSpec(kind="uwsgi", workers=2),
    proxy=ProxySpec(kind="apache", protocol="fastcgi"),
)
PROXIED["worker-unix-uwsgi-protocol"] = StackSpec(
    app=SLEEPY, server=ServerSpec(kind="uwsgi", workers=2),
    proxy=ProxySpec(kind="apache", mpm="worker", transport="unix", protocol="uwsgi"),
)


@pytest.mark.parametrize("name", list(PROXIED))
def test_apache_proxies_to_the_app_server(name: str, apache_gone: Check) -> None:
    spec = PROXIED[name]
    probe = RequestSpec(method="POST", path="/some/path?q=1", body="payload")
    with launch_stack(spec, probe=probe, startup_timeout_s=20) as stack:
        assert set(stack.processes) == {"app", "apache"}
        assert fetch(stack.url("/any/path?x=1"))[::2] == (200, b"ok\n")
        assert fetch(stack.url("/post"), b"a=1")[::2] == (200, b"ok\n")
        mpm = spec.proxy.apache_mpm
        assert f"mod_mpm_{mpm}.so" in (stack.workdir / apache_conf.CONF_NAME).read_text()
        # Apache's parent is root; its children switched to www-data when we are root.
        procs = apache_processes(stack.workdir)
        assert len(procs) >= 2
        if os.geteuid() == 0:
            assert {p.username() for p in procs} == {"root", apache_user.RUN_USER}
        if spec.proxy.transport == "unix":
            sock = stack.workdir / "app.sock"
            assert sock.is_socket() and sock.stat().st_mode & 0o777 == 0o660
        assert not log_problems(stack)
    apache_gone(stack)


def test_a_stopped_backend_is_attributed(apache_gone: Check) -> None:
    """gunicorn gone: Apache answers 503, and the log line counts as upstream_refused."""
    spec = StackSpec(app=SLEEPY, server=GUNICORN, proxy=ProxySpec(kind="apache"))
    with launch_stack(spec, probe=RequestSpec(), startup_timeout_s=20) as stack:
        cursor = LogCursor({role: p.log_path for role, p in stack.processes.items()})
        stack.processes["app"].stop()
        assert [fetch(stack.url("/"))[0] for _ in range(3)] == [503] * 3
        events = cursor.events()
        assert events.counts.get("upstream_refused") == 3
        assert "AH00957" in events.examples["upstream_refused"]
    apache_gone(stack)


def test_mod_wsgi_serves_sleepy_app_with_processes_times_threads(apache_gone: Check) -> None:
    """2 daemon processes x 2 threads answer 4 requests of 0.4 s side by side; the sampler
    gives the daemons role app; they run as www-data (as root) and stop with Apache."""
    sleepy = AppSpec(ref="sleepy", env={"SERVELAB_SLEEP_S": "0.4"})
    spec = StackSpec(
        app=sleepy, server=ServerSpec(kind="mod_wsgi", workers=2, threads=2),
        proxy=ProxySpec(kind="apache", mpm="event"),
    )
    probe = RequestSpec(method="POST", body="x")
    with launch_stack(spec, probe=probe, startup_timeout_s=20) as stack:
        assert set(stack.processes) == {"apache"}
        assert isinstance(stack.app_address, Path) and stack.app_address.is_socket()
        statuses: list[tuple[int, bytes]] = []

        def four_at_once() -> float:
            clients = [
                threading.Thread(target=lambda: statuses.append(fetch(stack.url("/p"))[::2]))
                for _ in range(4)
            ]
            start = time.monotonic()
            for client in clients:
                client.start()
            for client in clients:
                client.join()
            return time.monotonic() - start

        # With fewer than 4 threads serving, 4 requests of 0.4 s take at least 0.8 s in any
        # attempt. A stall of this VM only adds time: the fastest of up to 3 attempts counts.
        with ProcessSampler({"apache": stack.processes["apache"].pid}) as sampler:
            took = [four_at_once()]
            while len(took) < 3 and min(took) >= 0.75:
                took.append(four_at_once())
        assert statuses == [(200, b"ok\n")] * 4 * len(took)
        assert min(took) < 0.75, f"4 requests of 0.4 s on 2x2 daemon threads took {took} s"
        roles = [u.role for u in sampler.usage()]
        assert roles.count("app") == 2 and roles.count("apache") >= 2
        daemons = [
            p for p in apache_processes(stack.workdir) if p.cmdline()[0].startswith("(wsgi:")
        ]
        assert len(daemons) == 2
        if os.geteuid() == 0:
            assert {p.username() for p in daemons} == {apache_user.RUN_USER}
        assert not log_problems(stack)
    apache_gone(stack)


@pytest.fixture
def django_sqlite() -> Iterator[dict[str, str]]:
    """A populated (small) SQLite database for the Django app, as userapp.app_database makes it."""
    from servelab.apps.django_app.populate import populate_database, sqlite_env

    workdir = Path(tempfile.mkdtemp(prefix="servelab-sqlite-"))
    try:
        env = sqlite_env(workdir / "bookshop.sqlite3")
        populate_database(env, authors=20, books=300)
        yield env
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_mod_wsgi_serves_django_on_sqlite(
    django_sqlite: dict[str, str], apache_gone: Check
) -> None:
    spec = StackSpec(
        app=AppSpec(ref="django", env=django_sqlite),
        server=ServerSpec(kind="mod_wsgi", workers=2, threads=2),
        proxy=ProxySpec(kind="apache", mpm="worker"),
    )
    with launch_stack(spec, probe=RequestSpec(path="/books/?min=1000&max=3000"),
                      startup_timeout_s=30) as stack:
        status, headers, body = fetch(stack.url("/books/?min=0&max=100000&page=2"))
        assert status == 200 and headers["Content-Type"].startswith("application/json")
        page = json.loads(body)
        assert page["count"] == 300 and len(page["books"]) == 20  # every book, 20 a page
        status, _, body = fetch(stack.url("/authors/3/"))
        assert status == 200 and json.loads(body)["name"] == "Author 2"
        assert fetch(stack.url("/authors/999/"))[0] == 404
        db = Path(django_sqlite["SERVELAB_DJANGO_SQLITE"])
        if os.geteuid() == 0:  # the daemons (www-data) may write it and its journal
            assert db.stat().st_mode & 0o660 == 0o660 and db.parent.stat().st_mode & 0o770 == 0o770
        assert not log_problems(stack)
    apache_gone(stack)


def test_mod_wsgi_refuses_an_asgi_app_before_starting() -> None:
    spec = StackSpec(server=ServerSpec(kind="mod_wsgi"), proxy=ProxySpec(kind="apache"))
    before = set(os.listdir(tempfile.gettempdir()))
    with (
        pytest.raises(SpecError, match="ASGI app; mod_wsgi serves WSGI apps only"),
        launch_stack(spec, probe=RequestSpec()),
    ):
        pass
    assert set(os.listdir(tempfile.gettempdir())) <= before


def test_missing_apache_is_reported_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", f"{tmp_path}:{Path(sys.executable).parent}")
    monkeypatch.setattr(apache, "FALLBACK_BINARY", tmp_path / "apache2")
    spec = StackSpec(app=SLEEPY, server=GUNICORN, proxy=ProxySpec(kind="apache"))
    with (
        pytest.raises(MissingToolError, match=r"apache2 \(Apache httpd\) is not installed"),
        launch_stack(spec, probe=RequestSpec()),
    ):
        pass


def test_apache_knob_with_nginx_is_a_one_line_cli_error(tmp_path: Path) -> None:
    experiment = tmp_path / "bad.toml"
    experiment.write_text(
        '[baseline.proxy]\nkind = "nginx"\nmpm = "prefork"\n\n'
        '[[workloads]]\nname = "w"\n[workloads.load]\nrequests = 10\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "servelab", "run", str(experiment), "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 2, done.stderr
    output = (done.stderr + done.stdout).strip()
    assert "mpm: Apache knob; set proxy kind 'apache'" in output
    assert "Traceback" not in output
