"""uWSGI's command lines and protocols, and nginx speaking them (checked by nginx -t)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from servelab.apps import ResolvedApp
from servelab.config.stack import ProxySpec, ServerSpec
from servelab.errors import SpecError
from servelab.fronts import nginx
from servelab.servers import uwsgi

ASGI = ResolvedApp("servelab.apps.seed_fastapi:app", "asgi", None, is_factory=False)

WSGI = ResolvedApp("servelab.apps.sleepy_wsgi:app", "wsgi", None, is_factory=False)


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize(
    ("protocol", "option"),
    [("http", "--http-socket"), ("uwsgi", "--socket"), ("fastcgi", "--fastcgi-socket")],
)
def test_uwsgi_command_protocols(protocol: str, option: str) -> None:
    server = ServerSpec(kind="uwsgi", workers=3, threads=2, backlog=2048, max_requests=50)
    argv = uwsgi.uwsgi_command(server, WSGI, protocol=protocol, port=7000, max_backlog=128)
    assert _after(argv, option) == "127.0.0.1:7000"
    assert _after(argv, "--module") == WSGI.import_path
    assert _after(argv, "--processes") == "3" and _after(argv, "--threads") == "2"
    assert _after(argv, "--listen") == "128"  # capped at somaxconn
    assert _after(argv, "--harakiri") == "60"
    assert _after(argv, "--max-requests") == "50"
    assert {"--master", "--die-on-term", "--skip-atexit", "--need-app", "--strict"} <= set(argv)


def test_uwsgi_command_unix_and_app_dir(tmp_path: Path) -> None:
    app = ResolvedApp("wsgi_mod:app", "wsgi", tmp_path, is_factory=False)
    argv = uwsgi.uwsgi_command(
        ServerSpec(kind="uwsgi", backlog=64), app, protocol="uwsgi", socket=tmp_path / "s"
    )
    assert _after(argv, "--socket") == str(tmp_path / "s")
    assert _after(argv, "--listen") == "64"
    assert _after(argv, "--chdir") == str(tmp_path)


@pytest.mark.parametrize(
    ("app", "message"),
    [(ASGI, "uwsgi serves WSGI apps only"),
     (ResolvedApp("m:f", "wsgi", None, is_factory=True), "factory")],
)
def test_uwsgi_refuses_apps_it_cannot_serve(app: ResolvedApp, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        uwsgi.uwsgi_command(ServerSpec(kind="uwsgi"), app, port=1)


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
@pytest.mark.parametrize("protocol", ["uwsgi", "fastcgi"])
@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_nginx_uwsgi_and_fastcgi_modes_pass_nginx_t(
    tmp_path: Path, protocol: str, transport: str
) -> None:
    proxy = ProxySpec(transport=transport, protocol=protocol)  # type: ignore[arg-type]
    upstream = (
        nginx.upstream_address("unix", socket=tmp_path / "app.sock")
        if transport == "unix"
        else nginx.upstream_address("tcp", port=9999)
    )
    conf = nginx.write_nginx_conf(proxy, workdir=tmp_path, listen_port=8999, upstream=upstream)
    nginx.nginx_check(conf)  # the real nginx -t
    lines = [line.strip() for line in conf.read_text().splitlines()]
    assert f"{protocol}_pass app_server;" in lines
    assert f"{protocol}_param PATH_INFO $document_uri;" in lines
    assert not any(line.startswith("proxy_pass") for line in lines)


def test_nginx_http_mode_keeps_proxy_pass(tmp_path: Path) -> None:
    text = nginx.render_nginx_conf(
        ProxySpec(), workdir=tmp_path, listen_port=1, upstream="127.0.0.1:2"
    )
    assert "proxy_pass http://app_server;" in text and "uwsgi_pass" not in text
