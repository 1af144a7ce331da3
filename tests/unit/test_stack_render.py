"""Config rendering (checked by the real nginx -t and gunicorn), app resolution."""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import servelab.launch as launch_module
from servelab.apps import BUILTIN_APPS, ResolvedApp, app_environment, resolve_app
from servelab.config.stack import AppSpec, ProxySpec, ServerSpec
from servelab.errors import SpecError, StackStartError
from servelab.fronts import nginx
from servelab.launch.readiness import log_excerpt
from servelab.launch.templates import nginx_quote
from servelab.servers import gunicorn, uvicorn

needs_nginx = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")

ASGI = ResolvedApp("servelab.apps.seed_fastapi:app", "asgi", None, is_factory=False)
WSGI = ResolvedApp("servelab.apps.sleepy_wsgi:app", "wsgi", None, is_factory=False)

# --------------------------------------------------------------------------- nginx

GRID = list(itertools.product(["tcp", "unix"], [0, 8], [True, False], [True, False]))


def _write_conf(tmp_path: Path, proxy: ProxySpec) -> tuple[Path, str]:
    if proxy.transport == "unix":
        upstream = nginx.upstream_address("unix", socket=tmp_path / "app.sock")
    else:
        upstream = nginx.upstream_address("tcp", port=18000)
    conf = nginx.write_nginx_conf(proxy, workdir=tmp_path, listen_port=18080, upstream=upstream)
    return conf, conf.read_text()


@needs_nginx
@pytest.mark.parametrize(("transport", "keepalive", "gzip", "buffering"), GRID)
def test_nginx_conf_grid_passes_nginx_t(
    tmp_path: Path, transport: str, keepalive: int, gzip: bool, buffering: bool
) -> None:
    proxy = ProxySpec(
        transport=transport,  # type: ignore[arg-type]
        upstream_keepalive=keepalive,
        gzip=gzip,
        buffering=buffering,
    )
    conf, text = _write_conf(tmp_path, proxy)
    nginx.nginx_check(conf)  # the real nginx -t

    lines = [line.strip() for line in text.splitlines()]
    assert ("keepalive 8;" in lines) == (keepalive == 8)
    assert not any(line.startswith("keepalive 0") for line in lines)
    if transport == "unix":
        assert f'server "unix:{tmp_path}/app.sock" fail_timeout=0;' in lines
    else:
        assert 'server "127.0.0.1:18000" fail_timeout=0;' in lines
    assert f"gzip {'on' if gzip else 'off'};" in lines
    assert f"proxy_buffering {'on' if buffering else 'off'};" in lines
    assert "listen 127.0.0.1:18080;" in lines
    # As the seed renders them, keepalive or not.
    assert "proxy_http_version 1.1;" in lines
    assert 'proxy_set_header Connection "";' in lines
    assert "daemon off;" in lines and "master_process on;" in lines
    for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        assert f'{name}_temp_path "{tmp_path}/tmp/{name}";' in lines
        assert (tmp_path / "tmp" / name).is_dir()


def test_nginx_conf_carries_the_knobs(tmp_path: Path) -> None:
    proxy = ProxySpec(
        worker_processes=3,
        worker_connections=512,
        client_keepalive_timeout_s=7,
        client_keepalive_requests=99,
        gzip_comp_level=2,
        gzip_min_length=1000,
        timeout_s=11,
    )
    _, text = _write_conf(tmp_path, proxy)
    lines = [line.strip() for line in text.splitlines()]
    for expected in (
        "worker_processes 3;",
        "worker_connections 512;",
        "keepalive_timeout 7;",
        "keepalive_requests 99;",
        "gzip_comp_level 2;",
        "gzip_min_length 1000;",
        "proxy_connect_timeout 11s;",
        "proxy_read_timeout 11s;",
        "proxy_send_timeout 11s;",
        "client_max_body_size 20M;",
        "gzip_proxied any;",
        "access_log off;",
        f'error_log "{tmp_path}/nginx.log" warn;',
        f'pid "{tmp_path}/nginx.pid";',
    ):
        assert expected in lines, expected


def test_user_root_only_when_running_as_root(tmp_path: Path) -> None:
    kwargs = {"workdir": tmp_path, "listen_port": 1, "upstream": "127.0.0.1:2"}
    as_root = nginx.render_nginx_conf(ProxySpec(), run_as_root=True, **kwargs)
    as_user = nginx.render_nginx_conf(ProxySpec(), run_as_root=False, **kwargs)
    assert "user root;" in as_root.splitlines()
    assert "user" not in {line.split(" ")[0] for line in as_user.splitlines()}


def test_nginx_quote_escapes() -> None:
    assert nginx_quote('/tmp/a b/"x"\\') == '"/tmp/a b/\\"x\\"\\\\"'


@needs_nginx
def test_nginx_check_reports_nginx_message(tmp_path: Path) -> None:
    conf, text = _write_conf(tmp_path, ProxySpec())
    conf.write_text(text.replace("tcp_nodelay on;", "tcp_nodelay maybe;"))
    with pytest.raises(StackStartError) as caught:
        nginx.nginx_check(conf)
    assert 'invalid value "maybe"' in caught.value.problem
    assert "test failed" in caught.value.detail


def test_upstream_address_needs_its_target() -> None:
    with pytest.raises(ValueError):
        nginx.upstream_address("unix")
    with pytest.raises(ValueError):
        nginx.upstream_address("tcp")


# ------------------------------------------------------------------------ gunicorn


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


# ------------------------------------------------------------------------- uvicorn


def test_uvicorn_command_tcp() -> None:
    server = ServerSpec(kind="uvicorn", workers=3, backlog=77, keepalive_s=9)
    argv = uvicorn.uvicorn_command(server, ASGI, port=18002)
    assert argv[:4] == [sys.executable, "-m", "uvicorn", ASGI.import_path]
    joined = " ".join(argv)
    for part in ("--host 127.0.0.1", "--port 18002", "--workers 3", "--backlog 77",
                 "--timeout-keep-alive 9", "--no-access-log", "--log-level warning",
                 "--interface asgi3"):
        assert part in joined, part
    assert "--factory" not in argv and "--uds" not in argv


def test_uvicorn_command_unix_wsgi_factory(tmp_path: Path) -> None:
    app = ResolvedApp("pkg.mod:make", "wsgi", tmp_path, is_factory=True)
    argv = uvicorn.uvicorn_command(ServerSpec(kind="uvicorn"), app, socket=tmp_path / "a.sock")
    joined = " ".join(argv)
    assert f"--uds {tmp_path}/a.sock" in joined and "--host" not in argv
    assert "--interface wsgi" in joined
    assert "--factory" in argv
    assert f"--app-dir {tmp_path}" in joined


# --------------------------------------------------------------------- resolve_app

USER_APP = '''
print("the app prints at import")

async def asgi_app(scope, receive, send):
    pass

def wsgi_app(environ, start_response):
    return [b""]

def create():
    return wsgi_app

def create_broken():
    raise RuntimeError("missing setting\\nDATABASE_URL")

class Callable:
    async def __call__(self, scope, receive, send):
        pass

instance = Callable()
not_an_app = 42
'''


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    package = tmp_path / "userpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "web.py").write_text(USER_APP)
    (package / "broken.py").write_text("import os\nraise ImportError('cannot load the config')\n")
    (package / "envcheck.py").write_text(
        "import os\nif os.environ.get('SERVELAB_TEST_FLAG') != 'yes':\n    raise SystemExit(1)\n"
        "def app(environ, start_response):\n    return []\n"
    )
    (package / "hardexit.py").write_text("import os\nos._exit(3)\n")
    return tmp_path


def test_builtin_apps() -> None:
    assert resolve_app(AppSpec(ref="fastapi")) == ResolvedApp(
        BUILTIN_APPS["fastapi"], "asgi", None, is_factory=False
    )
    assert resolve_app(AppSpec(ref="sleepy")).interface == "wsgi"


@pytest.mark.parametrize("name", sorted(BUILTIN_APPS))
def test_builtin_table_matches_real_import(name: str) -> None:
    """The shortcut for built-ins says what importing them would say."""
    real = resolve_app(AppSpec(ref=BUILTIN_APPS[name]))
    assert real == resolve_app(AppSpec(ref=name))


@pytest.mark.parametrize(
    ("attr", "interface", "is_factory"),
    [("asgi_app", "asgi", False), ("wsgi_app", "wsgi", False), ("instance", "asgi", False),
     ("create", "wsgi", True), ("create()", "wsgi", True)],
)
def test_user_app_kinds(app_dir: Path, attr: str, interface: str, is_factory: bool) -> None:
    resolved = resolve_app(AppSpec(ref=f"userpkg.web:{attr}", app_dir=app_dir))
    assert resolved == ResolvedApp(
        f"userpkg.web:{attr.removesuffix('()')}", interface, app_dir.resolve(), is_factory  # type: ignore[arg-type]
    )


def test_app_env_is_set_for_the_import(app_dir: Path) -> None:
    spec = AppSpec(ref="userpkg.envcheck:app", app_dir=app_dir, env={"SERVELAB_TEST_FLAG": "yes"})
    assert resolve_app(spec).interface == "wsgi"


def test_missing_module(app_dir: Path) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref="userpkg.nothere:app", app_dir=app_dir))
    assert "No module named 'userpkg.nothere'" in caught.value.problem


def test_import_error_message_on_one_line(app_dir: Path) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref="userpkg.broken:app", app_dir=app_dir))
    assert "ImportError: cannot load the config" in caught.value.problem
    assert "\n" not in caught.value.one_line()
    assert "broken.py" in caught.value.detail  # the traceback tail, for who wants it


def test_failing_factory(app_dir: Path) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref="userpkg.web:create_broken", app_dir=app_dir))
    assert "RuntimeError: missing setting DATABASE_URL" in caught.value.problem


@pytest.mark.parametrize(("attr", "says"), [("not_an_app", "neither"), ("nope", "no attribute")])
def test_not_an_app(app_dir: Path, attr: str, says: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref=f"userpkg.web:{attr}", app_dir=app_dir))
    assert says in caught.value.problem


def test_process_exit_during_import(app_dir: Path) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref="userpkg.envcheck:app", app_dir=app_dir))
    assert "SystemExit: 1" in caught.value.problem


def test_hard_exit_during_import(app_dir: Path) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref="userpkg.hardexit:app", app_dir=app_dir))
    assert "exit code 3" in caught.value.problem


@pytest.mark.parametrize(
    "ref", ["userpkg", "userpkg.web", "userpkg.web:", ":app", "a:b:c", "mod:app(1)",
            "bad path:app", "mod:obj.attr", "1mod:app", ""],
)
def test_malformed_paths(ref: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref=ref))
    assert "expected package.module:attr" in caught.value.fix


def test_app_dir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not a directory"):
        resolve_app(AppSpec(ref="m:app", app_dir=tmp_path / "missing"))


def test_app_environment_puts_app_dir_first(tmp_path: Path) -> None:
    env = app_environment({"PYTHONPATH": "/extra", "X": "1"}, tmp_path)
    parts = env["PYTHONPATH"].split(":")
    assert parts[:2] == [str(tmp_path), "/extra"]
    assert env["X"] == "1"


# ------------------------------------------------------------------ launch helpers


def test_workdir_falls_back_to_tmp_when_socket_path_too_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(deep))
    workdir = launch_module._make_workdir()
    try:
        assert workdir.parent == Path("/tmp") and workdir.name.startswith("servelab-")
        assert len(str(workdir / launch_module.SOCKET_NAME)) < 108
        assert list(deep.iterdir()) == []
    finally:
        workdir.rmdir()


GUNICORN_BOOT_FAILURE = """\
[INFO] Starting gunicorn
[INFO] Booting worker with pid: 11
[ERROR] Exception in worker process
Traceback (most recent call last):
  File "gunicorn/arbiter.py", line 1, in spawn_worker
    worker.init_process()
  File "app.py", line 3, in <module>
    raise RuntimeError("no DATABASE_URL")
RuntimeError: no DATABASE_URL
""" + "\n".join(f"[INFO] filler line {i}" for i in range(30)) + """
[ERROR] Reason: Worker failed to boot.
"""


def test_log_excerpt_keeps_the_first_error_and_the_tail() -> None:
    excerpt = log_excerpt(GUNICORN_BOOT_FAILURE, lines=5).splitlines()
    assert excerpt[0] == "[ERROR] Exception in worker process"
    assert "RuntimeError: no DATABASE_URL" in excerpt
    assert "[INFO] filler line 0" not in excerpt
    assert excerpt[-1] == "[ERROR] Reason: Worker failed to boot."
    assert len(excerpt) == 7 + 1 + 5  # the error block, "[...]", the tail


def test_log_excerpt_is_a_plain_tail_when_the_error_is_in_it() -> None:
    text = "\n".join(["a", "b", "[ERROR] late", "c"])
    assert log_excerpt(text, lines=3) == "b\n[ERROR] late\nc"
    assert log_excerpt("", lines=3) == ""
