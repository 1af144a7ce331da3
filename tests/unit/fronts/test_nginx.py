"""nginx's config rendering, checked by the real nginx -t."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest

from servelab.config.stack import ProxySpec
from servelab.errors import StackStartError
from servelab.fronts import nginx
from servelab.host.templates import nginx_quote

needs_nginx = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")

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


@pytest.mark.parametrize(
    ("host", "listen"), [("127.0.0.1", "127.0.0.1:8123"), ("10.0.0.5", "10.0.0.5:8123"),
                         ("::1", "[::1]:8123")]
)  # fmt: skip
def test_nginx_listens_on_loopback_unless_told(tmp_path: Path, host: str, listen: str) -> None:
    kwargs = {"workdir": tmp_path, "listen_port": 8123, "upstream": "127.0.0.1:2"}
    text = nginx.render_nginx_conf(ProxySpec(), listen_host=host, **kwargs)
    assert f"listen {listen};" in text
    assert "listen 127.0.0.1:8123;" in nginx.render_nginx_conf(ProxySpec(), **kwargs)


@needs_nginx
def test_the_access_log_is_opt_in_in_the_stacks_own_directory(tmp_path: Path) -> None:
    conf, text = _write_conf(tmp_path, ProxySpec(access_log=True))
    nginx.nginx_check(conf)
    lines = [line.strip() for line in text.splitlines()]
    assert f'access_log "{tmp_path}/access.log" combined;' in lines
    assert "access_log off;" not in lines
    # Not part of what is exported: a deployed nginx keeps its own logging choice.
    deploy = nginx.NginxDeploy(
        listen="0.0.0.0:80", user="www-data", pid_path=Path("/run/x.pid"),
        temp_dir=Path("/var/lib/x"), source="x",
    )
    exported = nginx.render_nginx_conf(
        ProxySpec(access_log=True), upstream="127.0.0.1:2", deploy=deploy
    )
    assert "access.log" not in exported and "access_log off;" in exported


def test_the_access_log_is_nginxs_knob_only() -> None:
    from servelab.prepare.checks import check_proxy

    with pytest.raises(ValueError, match="access_log: nginx knob"):
        check_proxy(ProxySpec(kind="apache", access_log=True))
