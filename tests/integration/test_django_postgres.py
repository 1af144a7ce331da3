"""The Django reference app on its own PostgreSQL (and on SQLite), served by real stacks."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import psutil
import psycopg
import pytest

from servelab import postgres
from servelab.apps.django_app.seed import seed_database, sqlite_env
from servelab.errors import MissingToolError
from servelab.procs import group_members
from servelab.spec import AppSpec, RequestSpec, StackSpec
from servelab.stacks import launch_stack

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
        seed_database(pg.django_env(), authors=50, books=1000)
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
        assert_stack_gone(stack)
    assert not workdir.exists()
    assert pg.process.exit_code() is not None and not group_members(pid)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_the_django_app_on_sqlite_under_uvicorn_workers(tmp_path: Path, assert_stack_gone) -> None:
    env = sqlite_env(tmp_path / "shop.db")
    seed_database(env, authors=20, books=300)
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
