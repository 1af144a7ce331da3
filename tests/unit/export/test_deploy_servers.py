"""servelab export for every server and front: granian, hypercorn and uWSGI behind nginx,
Apache in front of an app server, Apache running the app with mod_wsgi (what the files
say; the servers' own checks on them). Booting them: tests/integration/test_export_boot.py."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from support import report_with_stack

from servelab.errors import ServelabError
from servelab.export.choose import choose_variant
from servelab.export.deploy import DeploySet, render_deploy_set
from servelab.export.layout import DeployLayout
from servelab.export.validate import stage
from servelab.fronts import apache
from servelab.plugins.front import get_front
from servelab.plugins.server import get_server

from .common import SLEEPY, load, systemd_complaints

BEST = "gthread-2x4-unix-keepalive"  # WSGI sleepy app, unix socket, upstream keepalive 8
HAVE_APACHE = shutil.which("apache2") is not None or apache.FALLBACK_BINARY.exists()
# The knobs a gunicorn variant has that another server refuses.
NOT_GUNICORN = {"worker_class": "uvicorn"}


def export(variant: str = BEST, *, server=None, proxy=None) -> DeploySet:
    report = report_with_stack(load(SLEEPY), variant, server=server, proxy=proxy)
    return render_deploy_set(
        report, choose_variant(report, variant), DeployLayout("shop"), source="result #3"
    )


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def exec_start(deploy: DeploySet, unit: str = "shop-app.service") -> str:
    return next(
        line for line in lines(deploy.files[unit]) if line.startswith("ExecStart=")
    ).removeprefix("ExecStart=")


def test_granian_is_a_command_line_in_the_unit_with_a_private_socket() -> None:
    deploy = export(server={"kind": "granian", "threads": 2, **NOT_GUNICORN})
    assert sorted(deploy.files) == sorted(
        ["nginx.conf", "shop-app.service", "shop-nginx.service", "99-shop.conf", "README.md"]
    )
    argv = exec_start(deploy).split()
    assert argv[:7] == [
        "/opt/shop/venv/bin/python", "-m", "granian", "--uds", "/run/shop/app.sock",
        "--interface", "wsgi",
    ]
    text = " ".join(argv)
    for part in ("--workers 2", "--runtime-threads 2", "--backlog 512",
                 "--workers-kill-timeout 30", "--uds-permissions 0660"):
        assert part in text, part
    assert argv[-1] == "servelab.apps.sleepy_wsgi:app"
    assert "granian has no request timeout" in deploy.files["README.md"]


def test_hypercorn_reads_its_settings_from_a_toml_file(tmp_path: Path) -> None:
    deploy = export(server={"kind": "hypercorn", "threads": 1, **NOT_GUNICORN})
    toml = lines(deploy.files["hypercorn.toml"])
    for line in ('bind = ["unix:/run/shop/app.sock"]', "workers = 2", "backlog = 512",
                 "keep_alive_timeout = 5", "graceful_timeout = 30", "umask = 0o007"):
        assert line in toml, line
    assert exec_start(deploy) == (
        "/opt/shop/venv/bin/python -m hypercorn --config /etc/shop/hypercorn.toml "
        "servelab.apps.sleepy_wsgi:app"
    )
    # The app keeps idle connections longer than nginx's pool does.
    assert "keepalive_timeout 4s;" in lines(deploy.files["nginx.conf"])
    server = get_server("hypercorn")
    (tmp_path / "hypercorn.toml").write_text(deploy.files["hypercorn.toml"])
    checked = server.check_deploy(tmp_path, tmp_path, {}, sys.executable)
    assert checked and "hypercorn.toml" in checked
    (tmp_path / "hypercorn.toml").write_text(deploy.files["hypercorn.toml"] + "wokers = 3\n")
    with pytest.raises(ServelabError, match="not hypercorn settings: wokers"):
        server.check_deploy(tmp_path, tmp_path, {}, sys.executable)


def test_uwsgi_writes_an_ini_that_its_strict_parser_accepts(tmp_path: Path) -> None:
    deploy = export(
        server={"kind": "uwsgi", "timeout_s": 60, **NOT_GUNICORN},
        proxy={"protocol": "uwsgi", "upstream_keepalive": 0, "timeout_s": 30},
    )
    ini = lines(deploy.files["uwsgi.ini"])
    assert ini[2] == "[uwsgi]"
    for line in ("socket = /run/shop/app.sock", "module = servelab.apps.sleepy_wsgi:app",
                 "processes = 2", "threads = 4", "listen = 512", "harakiri = 60",
                 "chmod-socket = 660", "chdir = /opt/shop/app", "strict = true",
                 "worker-reload-mercy = 30"):
        assert line in ini, line
    assert "skip-atexit = true" not in ini  # for quick stops while measuring only
    assert exec_start(deploy) == "/opt/shop/venv/bin/uwsgi --ini /etc/shop/uwsgi.ini"
    nginx_conf = lines(deploy.files["nginx.conf"])
    assert "uwsgi_pass app_server;" in nginx_conf
    # harakiri ends a slow request before nginx gives up on it.
    assert "uwsgi_read_timeout 65s;" in nginx_conf
    assert "| nginx proxy_connect/read/send_timeout | 30 s | 65 s |" in deploy.files["README.md"]
    server = get_server("uwsgi")
    (tmp_path / "uwsgi.ini").write_text(deploy.files["uwsgi.ini"])
    assert "uwsgi.ini" in server.check_deploy(tmp_path, tmp_path, {}, sys.executable)
    (tmp_path / "uwsgi.ini").write_text(deploy.files["uwsgi.ini"] + "proceses = 3\n")
    with pytest.raises(ServelabError, match="unknown config directive: proceses"):
        server.check_deploy(tmp_path, tmp_path, {}, sys.executable)


def test_uwsgi_over_tcp_speaks_http_on_loopback() -> None:
    deploy = export("sync-1-tcp", server={"kind": "uwsgi", **NOT_GUNICORN})
    ini = lines(deploy.files["uwsgi.ini"])
    assert "http-socket = 127.0.0.1:8000" in ini and "chmod-socket = 660" not in ini


def test_apache_in_front_of_gunicorn_is_an_httpd_conf_and_its_unit() -> None:
    deploy = export(proxy={"kind": "apache"})
    assert sorted(deploy.files) == sorted(
        ["httpd.conf", "gunicorn.conf.py", "shop-app.service", "shop-apache.service",
         "99-shop.conf", "README.md"]
    )
    conf = lines(deploy.files["httpd.conf"])
    for line in ("Listen 80", "User www-data", 'PidFile "/run/shop-apache/httpd.pid"',
                 'ErrorLog "/dev/stderr"', "Timeout 35",
                 'ProxyPass "/" "unix:/run/shop/app.sock|http://localhost/" retry=0 timeout=35 '
                 "connectiontimeout=35 max=8 ttl=4"):
        assert line in conf, line
    unit = lines(deploy.files["shop-apache.service"])
    for line in ("ExecStartPre=/usr/sbin/apache2 -t -f /etc/shop/httpd.conf",
                 "ExecStart=/usr/sbin/apache2 -f /etc/shop/httpd.conf -DFOREGROUND",
                 "KillSignal=SIGWINCH", "RuntimeDirectory=shop-apache",
                 "After=network-online.target shop-app.service"):
        assert line in unit, line
    assert "StateDirectory" not in deploy.files["shop-apache.service"]
    readme = deploy.files["README.md"]
    assert "usermod -aG shop-sock www-data" in readme
    assert "| Apache ProxyPass ttl | 60 s | 4 s |" in readme  # below gunicorn's 5 s keepalive
    assert "Apache waits 35 s (`Timeout and ProxyPass timeout`)" in readme
    assert "nginx" not in deploy.files["shop-apache.service"]


def test_mod_wsgi_runs_the_app_inside_apache_without_a_unit_of_its_own() -> None:
    deploy = export(
        server={"kind": "mod_wsgi", **NOT_GUNICORN},
        proxy={"kind": "apache", "upstream_keepalive": 0},
    )
    assert sorted(deploy.files) == sorted(
        ["httpd.conf", "app.wsgi", "shop-apache.service", "99-shop.conf", "README.md"]
    )
    conf = deploy.files["httpd.conf"]
    assert (
        'WSGIDaemonProcess shop processes=2 threads=4 \\\n    user="shop" group="shop" \\\n'
        '    python-home="/opt/shop/venv" python-path="/opt/shop/app" \\\n'
        '    home="/opt/shop/app" display-name=%{GROUP} listen-backlog=512 \\\n'
        "    request-timeout=30\n"
    ) in conf
    assert 'WSGIScriptAlias / "/etc/shop/app.wsgi" process-group=shop' in conf
    assert 'LoadModule wsgi_module "/opt/shop/venv/lib/' in conf  # the venv's own build
    assert 'WSGISocketPrefix "/run/shop-apache/wsgi"' in conf
    assert "'servelab.apps.sleepy_wsgi'), 'app')" in deploy.files["app.wsgi"]
    unit = lines(deploy.files["shop-apache.service"])
    assert "Environment=SERVELAB_SLEEP_S=0.02" in unit
    assert "WorkingDirectory=/opt/shop/app" in unit
    assert "After=network-online.target" in unit
    readme = deploy.files["README.md"]
    assert "Apache runs the app itself" in readme and "shop-app.service" not in readme
    assert "apt-get install apache2 apache2-dev" in readme


def _mod_wsgi_export(tmp_path: Path) -> Path:
    deploy = export(
        server={"kind": "mod_wsgi", **NOT_GUNICORN},
        proxy={"kind": "apache", "upstream_keepalive": 0},
    )
    out = tmp_path / "export"
    out.mkdir()
    for name, text in deploy.files.items():
        (out / name).write_text(text)
    return out


def test_a_staged_apache_conf_switches_only_to_users_that_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _mod_wsgi_export(tmp_path)
    layout = DeployLayout("shop", front="apache")
    checked = stage(out, layout, tmp_path / "check", for_boot=False)
    conf = checked.front_conf.read_text()
    assert checked.app_argv is None and checked.front_conf.name == "httpd.conf"
    assert 'user="shop"' not in conf  # no such user here: apache2 -t would refuse it
    assert "/opt/shop" not in conf and "Listen 127.0.0.1:" in conf
    monkeypatch.setattr(apache, "run_as", lambda: None)  # booted by a user, not root
    booted = stage(out, layout, tmp_path / "boot", for_boot=True).front_conf.read_text()
    assert "\nUser " not in booted and "user=" not in booted


@pytest.mark.skipif(not HAVE_APACHE, reason="apache2 is not installed")
def test_apache_checks_the_staged_mod_wsgi_conf(tmp_path: Path) -> None:
    out = _mod_wsgi_export(tmp_path)
    staged = stage(out, DeployLayout("shop", front="apache"), tmp_path / "s", for_boot=False)
    assert get_front("apache").check_deploy(staged.front_conf) == "apache2 -t accepts httpd.conf"
    staged.front_conf.write_text(staged.front_conf.read_text() + "NoSuchDirective on\n")
    with pytest.raises(ServelabError, match=r"fails apache2 -t: .*NoSuchDirective"):
        get_front("apache").check_deploy(staged.front_conf)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_accepts_the_apache_and_uwsgi_units(tmp_path: Path) -> None:
    hosted = export(
        server={"kind": "mod_wsgi", **NOT_GUNICORN},
        proxy={"kind": "apache", "upstream_keepalive": 0},
    )
    uwsgi = export(server={"kind": "uwsgi", **NOT_GUNICORN}, proxy={"upstream_keepalive": 0})
    units = []
    for kind, deploy, name in (("apache", hosted, "shop-apache.service"),
                               ("uwsgi", uwsgi, "shop-app.service")):
        # systemd checks that ExecStart's program exists: point it at this machine's.
        text = deploy.files[name].replace(
            "/opt/shop/venv/bin/uwsgi", str(Path(sys.executable).parent / "uwsgi")
        ).replace("/usr/sbin/apache2", str(apache.FALLBACK_BINARY))
        (tmp_path / f"{kind}-{name}").write_text(text)
        units.append(tmp_path / f"{kind}-{name}")
    complaints = systemd_complaints(units)
    assert not complaints, "\n".join(complaints)
