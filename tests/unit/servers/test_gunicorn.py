"""gunicorn's config (checked by gunicorn itself) and its worker class fitted to the app."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from servelab.apps import ResolvedApp, app_environment
from servelab.config.stack import ServerSpec
from servelab.errors import SpecError
from servelab.servers import gunicorn

ASGI = ResolvedApp("servelab.apps.seed_fastapi:app", "asgi", None, is_factory=False)

WSGI = ResolvedApp("servelab.apps.sleepy_wsgi:app", "wsgi", None, is_factory=False)


def _exec_conf(text: str) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(compile(text, "gunicorn.conf.py", "exec"), namespace)
    return namespace


@pytest.mark.parametrize(
    ("worker_class", "expected"),
    [("uvicorn", "uvicorn_worker.UvicornWorker"), ("sync", "sync"), ("gthread", "gthread")],
)
def test_gunicorn_conf_values(tmp_path: Path, worker_class: str, expected: str) -> None:
    server = ServerSpec(
        worker_class=worker_class,  # type: ignore[arg-type]
        workers=3, threads=4, backlog=64, keepalive_s=7, timeout_s=30,
    )
    bind = gunicorn.bind_address(port=18001)
    values = _exec_conf(
        gunicorn.render_gunicorn_conf(server, bind=bind, errorlog=tmp_path / "g.log")
    )
    assert values["bind"] == "127.0.0.1:18001"
    assert values["worker_class"] == expected
    assert (values["workers"], values["threads"], values["backlog"]) == (3, 4, 64)
    assert (values["keepalive"], values["timeout"]) == (7, 30)
    assert values["graceful_timeout"] == gunicorn.GRACEFUL_TIMEOUT_S
    assert values["accesslog"] is None
    assert values["errorlog"] == str(tmp_path / "g.log")
    assert values["worker_tmp_dir"] in ("/dev/shm", None)


def test_gunicorn_conf_unix_bind(tmp_path: Path) -> None:
    bind = gunicorn.bind_address(socket=tmp_path / "app.sock")
    text = gunicorn.render_gunicorn_conf(ServerSpec(), bind=bind, errorlog=tmp_path / "g.log")
    assert _exec_conf(text)["bind"] == f"unix:{tmp_path}/app.sock"


@pytest.mark.parametrize(("worker_class", "app"), [("sync", WSGI), ("uvicorn", ASGI)])
def test_gunicorn_accepts_rendered_conf(
    tmp_path: Path, worker_class: str, app: ResolvedApp
) -> None:
    """gunicorn --check-config loads the config and imports the app, then exits."""
    server = ServerSpec(worker_class=worker_class)  # type: ignore[arg-type]
    conf = gunicorn.write_gunicorn_conf(
        server, workdir=tmp_path, bind=gunicorn.bind_address(socket=tmp_path / "app.sock")
    )
    argv = gunicorn.gunicorn_command(conf, app)
    assert argv[:3] == [sys.executable, "-m", "gunicorn"]
    done = subprocess.run(
        [*argv[:3], "--check-config", *argv[3:]],
        capture_output=True, text=True, timeout=60, env=app_environment({}, None),
    )
    assert done.returncode == 0, done.stderr


def test_gunicorn_factory_target() -> None:
    factory = ResolvedApp("pkg.mod:create", "asgi", None, is_factory=True)
    assert gunicorn.gunicorn_command(Path("c.py"), factory)[-1] == "pkg.mod:create()"


@pytest.mark.parametrize(
    ("worker_class", "app", "fix_mentions"),
    [("uvicorn", WSGI, "'sync' or 'gthread'"), ("sync", ASGI, "'uvicorn'"),
     ("gthread", ASGI, "'uvicorn'")],
)
def test_worker_class_mismatch_is_a_spec_error(
    worker_class: str, app: ResolvedApp, fix_mentions: str
) -> None:
    with pytest.raises(SpecError) as caught:
        gunicorn.check_worker_class(ServerSpec(worker_class=worker_class), app)  # type: ignore[arg-type]
    assert app.interface.upper() in caught.value.problem
    assert fix_mentions in caught.value.fix


@pytest.mark.parametrize(
    ("worker_class", "app"), [("uvicorn", ASGI), ("sync", WSGI), ("gthread", WSGI)]
)
def test_worker_class_match_passes(worker_class: str, app: ResolvedApp) -> None:
    gunicorn.check_worker_class(ServerSpec(worker_class=worker_class), app)  # type: ignore[arg-type]
