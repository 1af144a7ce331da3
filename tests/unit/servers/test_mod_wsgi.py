"""mod_wsgi: its daemon settings and script, the venv's module, who may read the Python."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from servelab.apps import SERVELAB_ROOT, ResolvedApp
from servelab.config.stack import ProxySpec, ServerSpec, StackSpec
from servelab.errors import SpecError, StackStartError
from servelab.fronts import apache, apache_conf, apache_user
from servelab.observe.metrics import _role
from servelab.plugins.server import get_server
from servelab.servers import mod_wsgi

HAVE_APACHE = shutil.which("apache2") is not None or apache.FALLBACK_BINARY.exists()

WSGI_APP = ResolvedApp("servelab.apps.sleepy_wsgi:app", "wsgi", None, False)

ASGI_APP = ResolvedApp("servelab.apps.seed_fastapi:app", "asgi", None, False)


def _render(spec: StackSpec, tmp_path: Path, **kwargs: object) -> str:
    return apache_conf.render_httpd_conf(spec, workdir=tmp_path, listen_port=8123, **kwargs)  # type: ignore[arg-type]


def test_mod_wsgi_config(tmp_path: Path) -> None:
    spec = StackSpec(
        server=ServerSpec(kind="mod_wsgi", workers=3, threads=2, backlog=50, timeout_s=9,
                          max_requests=100),
        proxy=ProxySpec(kind="apache", mpm="worker"),
    )
    app_dir = tmp_path / "code"
    module = tmp_path / "mod_wsgi.so"
    settings = mod_wsgi.wsgi_settings(
        spec.server, WSGI_APP, tmp_path, [app_dir, Path("/srv")], module
    )
    text = _render(spec, tmp_path, wsgi=settings)
    assert f'LoadModule wsgi_module "{module}"' in text
    assert "mod_proxy" not in text and "ProxyPass" not in text
    daemon = " ".join(
        line.strip(" \\") for line in text.split("WSGIDaemonProcess ")[1].splitlines()[:4]
    )
    assert daemon.startswith("servelab processes=3 threads=2 ")
    for option in (
        f'python-home="{sys.prefix}"', f'python-path="{app_dir}:/srv"', 'home="/srv"',
        "display-name=%{GROUP}", "listen-backlog=50", "request-timeout=9",
        "maximum-requests=100",
    ):
        assert option in daemon, option
    assert f'WSGIPythonHome "{sys.prefix}"' in text
    assert "WSGIProcessGroup servelab\nWSGIApplicationGroup %{GLOBAL}\n" in text
    assert "process-group=servelab application-group=%{GLOBAL}" in text
    assert f'WSGISocketPrefix "{tmp_path}/wsgi"' in text


def test_hosting_writes_the_script_and_says_what_apache_needs(tmp_path: Path) -> None:
    """What the launcher hands Apache (``Front.configure_hosting``): the script written,
    the daemon settings and the module; a built-in app imports servelab from its root."""
    server = ServerSpec(kind="mod_wsgi", workers=2)
    hosted = get_server("mod_wsgi").hosting(server, WSGI_APP, tmp_path)
    script = tmp_path / mod_wsgi.SCRIPT_NAME
    assert script.stat().st_mode & 0o777 == 0o644
    assert script.read_text() == mod_wsgi.wsgi_script(WSGI_APP.gunicorn_target)
    assert hosted["script"] == script and hosted["processes"] == 2
    assert hosted["python_path"] == str(SERVELAB_ROOT) and hosted["home"] == SERVELAB_ROOT
    assert hosted["module"] == mod_wsgi.mod_wsgi_module()
    mine = get_server("mod_wsgi").hosting(
        server, ResolvedApp("blog:app", "wsgi", tmp_path / "src", False), tmp_path
    )
    assert mine["python_path"] == f"{tmp_path / 'src'}:{SERVELAB_ROOT}"
    assert mine["home"] == tmp_path / "src"


def test_a_server_with_processes_of_its_own_is_hosted_by_no_front(tmp_path: Path) -> None:
    with pytest.raises(NotImplementedError, match="gunicorn runs as its own processes"):
        get_server("gunicorn").hosting(ServerSpec(), WSGI_APP, tmp_path)


@pytest.mark.skipif(not HAVE_APACHE, reason="apache2 is not installed")
def test_mod_wsgi_config_passes_apache_check(tmp_path: Path) -> None:
    spec = StackSpec(server=ServerSpec(kind="mod_wsgi"), proxy=ProxySpec(kind="apache"))
    hosted = get_server("mod_wsgi").hosting(spec.server, WSGI_APP, tmp_path)
    conf = apache_conf.write_httpd_conf(spec, workdir=tmp_path, listen_port=8123, wsgi=hosted)
    apache.apache_check(conf)


def test_mod_wsgi_module_is_the_venvs() -> None:
    module = mod_wsgi.mod_wsgi_module()
    assert module.is_file() and str(module).startswith(sys.prefix)
    out = subprocess.run(
        [str(Path(sys.executable).parent / "mod_wsgi-express"), "module-config"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert f'LoadModule wsgi_module "{module}"' in out


def test_wsgi_script_imports_or_builds_the_app() -> None:
    script = mod_wsgi.wsgi_script(WSGI_APP.gunicorn_target)
    namespace: dict[str, object] = {}
    exec(compile(script, "app.wsgi", "exec"), namespace)
    from servelab.apps.sleepy_wsgi import app

    assert namespace["application"] is app
    factory = ResolvedApp("pkg.mod:make", "wsgi", None, True)
    assert "getattr(importlib.import_module('pkg.mod'), 'make')()" in mod_wsgi.wsgi_script(
        factory.gunicorn_target
    )


def test_mod_wsgi_refuses_asgi_app() -> None:
    with pytest.raises(SpecError, match="ASGI app; mod_wsgi serves WSGI apps only") as caught:
        get_server("mod_wsgi").check_app(ServerSpec(kind="mod_wsgi"), ASGI_APP)
    assert "gunicorn" in caught.value.fix


class _FakeProc:
    def __init__(self, argv0: str) -> None:
        self.argv0 = argv0

    def cmdline(self) -> list[str]:
        return [self.argv0, "-f", "/tmp/x/httpd.conf"]


def test_mod_wsgi_daemons_get_the_app_role() -> None:
    assert _role("apache", _FakeProc("(wsgi:servelab)     ")) == "app"  # type: ignore[arg-type]
    assert _role("apache", _FakeProc("/usr/sbin/apache2")) == "apache"  # type: ignore[arg-type]
    assert _role("nginx", _FakeProc("(wsgi:x)")) == "nginx"  # type: ignore[arg-type]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Apache's children switch user)")
def test_daemon_access_names_the_closed_directory() -> None:
    who = apache_user.run_as()
    assert who is not None and who.user == apache_user.RUN_USER
    closed = Path(tempfile.mkdtemp(prefix="servelab-test-"))  # 0700, like /root
    try:
        (closed / "os.py").write_text("")
        message = f"cannot read {closed}/os.py .{closed} is closed to it"
        with pytest.raises(StackStartError, match=message):
            apache_user.check_daemon_access(who, [closed / "os.py"])
        apache_user.open_to(closed, who, 0o710)  # what launch_stack does with the stack's temp dir
        apache_user.check_daemon_access(who, [closed / "os.py"])
    finally:
        shutil.rmtree(closed)
