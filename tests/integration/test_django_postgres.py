"""The Django reference app on its own PostgreSQL (and on SQLite), served by real stacks."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
import psycopg
import pytest
from support import owned_by

from servelab.apps.django_app.populate import populate_database, sqlite_env
from servelab.config.load import RequestSpec
from servelab.config.stack import AppSpec, StackSpec
from servelab.errors import MissingToolError
from servelab.host.procs import group_members
from servelab.launch import launch_stack
from servelab.services import postgres

pytestmark = pytest.mark.integration

WSGI = "servelab.apps.django_app.wsgi:application"
ASGI = "servelab.apps.django_app.asgi:application"


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.status == 200
        return json.loads(answer.read())


def test_postgres_lifecycle_serves_the_django_app_through_gunicorn_and_nginx(
    assert_stack_gone,
) -> None:
    with postgres.run_postgres() as pg:
        workdir, pid = pg.workdir, pg.process.pid
        assert (workdir / "data" / "PG_VERSION").is_file()
        populate_database(pg.django_env(), authors=50, books=1000)
        with psycopg.connect(pg.conninfo) as conn:
            (expected,) = conn.execute(
                "SELECT count(*) FROM bookshop_book WHERE price_cents BETWEEN 1000 AND 2000"
            ).fetchone()
        spec = StackSpec(
            app=AppSpec(ref=WSGI, env=pg.django_env()),
            server={"kind": "gunicorn", "worker_class": "sync", "workers": 2},
            proxy={"kind": "nginx", "transport": "unix"},
        )
        with launch_stack(spec, probe=RequestSpec(path="/books/")) as stack:
            page = get_json(stack.url("/books/?min=1000&max=2000"))
            assert page["count"] == expected > 0 and len(page["books"]) == 20
            assert get_json(stack.url("/authors/1/"))["n"] > 0
            # The app's connections really are on this cluster.
            with psycopg.connect(pg.conninfo) as conn:
                (clients,) = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> "
                    "pg_backend_pid()", (pg.dbname,)
                ).fetchone()
            assert clients >= 1
    # After the cluster too: its processes carry the same owner marker as the stack's.
    assert_stack_gone(stack)
    assert not workdir.exists()
    assert pg.process.exit_code() is not None and not group_members(pid)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_the_django_app_on_sqlite_under_uvicorn_workers(tmp_path: Path, assert_stack_gone) -> None:
    env = sqlite_env(tmp_path / "shop.db")
    populate_database(env, authors=20, books=300)
    spec = StackSpec(
        app=AppSpec(ref=ASGI, env=env),
        server={"kind": "gunicorn", "worker_class": "uvicorn", "workers": 1},
        proxy={"kind": "nginx", "transport": "tcp"},
    )
    with launch_stack(spec, probe=RequestSpec(path="/books/")) as stack:
        assert get_json(stack.url("/books/?min=0&max=100000"))["count"] == 300
    assert_stack_gone(stack)


def test_no_postgresql_installed_is_a_clear_error(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(postgres, "PG_ROOT", tmp_path)
    with (
        pytest.raises(MissingToolError, match="PostgreSQL's server is not installed"),
        postgres.run_postgres(),
    ):
        pass




def pg_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("servelab-pg-*"))


def test_study_on_the_django_app_with_its_own_postgresql(tmp_path: Path) -> None:
    before = pg_dirs()
    proc = subprocess.run(
        [sys.executable, "-m", "servelab", "study", "keepalive", "--app", "django",
         "--database", "postgresql", "-r", "1", "-d", "1", "-c", "8", "--warmup", "20",
         "--results", str(tmp_path)],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "PostgreSQL" in proc.stderr and "worker class uvicorn -> gthread" in proc.stderr
    (runs_file,) = tmp_path.glob("*/runs.jsonl")
    runs = [json.loads(line) for line in runs_file.read_text().splitlines()]
    assert len(runs) == 2
    for run in runs:
        assert run["load"]["status_counts"] == {"200": run["load"]["requests_total"]}
    assert pg_dirs() <= before


def test_a_killed_servelab_leaves_no_postgresql_behind(tmp_path: Path) -> None:
    before = pg_dirs()
    proc = subprocess.Popen(
        [sys.executable, "-m", "servelab", "study", "keepalive", "--app", "django",
         "--database", "postgresql", "-r", "3", "-d", "3", "-c", "8", "--results", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(tmp_path.glob("*/runs.jsonl")):
            time.sleep(0.2)
        assert pg_dirs() - before, "servelab's PostgreSQL was not running"
        assert owned_by(proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (owned_by(proc.pid) or pg_dirs() - before):
        time.sleep(0.2)
    assert owned_by(proc.pid) == []
    assert pg_dirs() <= before


def test_postgresql_failing_to_start_is_a_clear_error_and_leaves_nothing(monkeypatch) -> None:
    import socket

    from servelab.errors import StackStartError

    before = pg_dirs()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setattr(postgres, "free_port", lambda: taken.getsockname()[1])
        with (
            pytest.raises(StackStartError, match="PostgreSQL exited during start-up") as caught,
            postgres.run_postgres(),
        ):
            pass
    assert "could not" in caught.value.detail  # postgres's own words: could not bind/create
    assert pg_dirs() <= before
