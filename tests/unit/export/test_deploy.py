"""servelab export: what the deploy files say (timeouts made consistent, socket or TCP)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.config.stack import StackSpec
from servelab.errors import ServelabError, SpecError
from servelab.export import export_result
from servelab.export.choose import Choice, choose_variant
from servelab.export.deploy import consistent_stack, render_deploy_set
from servelab.export.layout import DeployLayout, app_places, check_listen

from .common import QUICK, SLEEPY, load


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def test_timeouts_and_keepalive_are_made_consistent() -> None:
    stack = StackSpec.model_validate(
        {
            "server": {"timeout_s": 60, "keepalive_s": 5},
            "proxy": {"timeout_s": 30, "upstream_keepalive": 8},
        }
    )
    fixed, adjustments = consistent_stack(stack)
    assert fixed.proxy.timeout_s == 65 > fixed.server.timeout_s
    assert fixed.proxy.upstream_keepalive_timeout_s == 4 < fixed.server.keepalive_s
    assert [a.setting for a in adjustments] == [
        "nginx proxy_connect/read/send_timeout",
        "nginx upstream keepalive_timeout",
    ]
    assert "502" in adjustments[1].why


def test_a_one_second_app_keepalive_is_raised_so_nginx_can_stay_below_it() -> None:
    stack = StackSpec.model_validate(
        {"server": {"keepalive_s": 1}, "proxy": {"upstream_keepalive": 4}}
    )
    fixed, adjustments = consistent_stack(stack)
    assert (fixed.server.keepalive_s, fixed.proxy.upstream_keepalive_timeout_s) == (2, 1)
    assert len(adjustments) == 2


def test_a_consistent_stack_is_left_alone() -> None:
    stack = StackSpec.model_validate(
        {
            "server": {"timeout_s": 30, "keepalive_s": 75},
            "proxy": {"timeout_s": 35, "upstream_keepalive": 8, "upstream_keepalive_timeout_s": 60},
        }
    )
    assert consistent_stack(stack) == (stack, [])


def test_unix_socket_export_keeps_the_socket_to_nginx_and_the_app() -> None:
    report = load(SLEEPY)
    deploy = render_deploy_set(
        report, choose_variant(report, "best"), DeployLayout("shop"), source="result #3"
    )
    files = deploy.files
    assert sorted(files) == sorted(
        [
            "nginx.conf", "gunicorn.conf.py", "shop-app.service", "shop-nginx.service",
            "99-shop.conf", "README.md",
        ]
    )
    nginx_conf, gunicorn_conf = lines(files["nginx.conf"]), lines(files["gunicorn.conf.py"])
    app_unit, nginx_unit = lines(files["shop-app.service"]), lines(files["shop-nginx.service"])
    # The measured knobs, from the measuring templates.
    assert 'server "unix:/run/shop/app.sock" fail_timeout=0;' in nginx_conf
    assert "keepalive 8;" in nginx_conf
    assert "workers = 2" in gunicorn_conf and "threads = 4" in gunicorn_conf
    assert "worker_class = 'gthread'" in gunicorn_conf and "backlog = 512" in gunicorn_conf
    assert "wsgi_app = 'servelab.apps.sleepy_wsgi:app'" in gunicorn_conf
    # The app times out before the proxy; nginx drops idle upstream connections first.
    assert "timeout = 30" in gunicorn_conf and "proxy_read_timeout 35s;" in nginx_conf
    assert "keepalive = 5" in gunicorn_conf and "keepalive_timeout 4s;" in nginx_conf
    # Only nginx and the app can use the socket (seed nginx_port_socket.md).
    assert "umask = 0o007" in gunicorn_conf
    assert "user www-data;" in nginx_conf
    for line in ("User=shop", "Group=shop-sock", "UMask=0007", "RuntimeDirectory=shop",
                 "RuntimeDirectoryMode=0750", "Type=notify",
                 "ExecStart=/opt/shop/venv/bin/gunicorn -c /etc/shop/gunicorn.conf.py",
                 "Environment=SERVELAB_SLEEP_S=0.02", "WorkingDirectory=/opt/shop/app"):
        assert line in app_unit, line
    for line in ("ExecStartPre=/usr/sbin/nginx -t -q -c /etc/shop/nginx.conf",
                 "ExecStart=/usr/sbin/nginx -c /etc/shop/nginx.conf", "KillSignal=SIGQUIT",
                 "After=network-online.target shop-app.service"):
        assert line in nginx_unit, line
    assert "net.core.somaxconn = 4096" in lines(files["99-shop.conf"])
    readme = files["README.md"]
    assert "279 (95 % CI 60.5 … 497)" in readme  # the measured numbers
    assert "better, +483.8 % (p = 0.045)" in readme
    assert "| nginx upstream keepalive_timeout | 60 s | 4 s |" in readme
    assert "usermod -aG shop-sock www-data" in readme
    assert "**unstable**" in readme  # the chosen variant's own warnings travel with it


def test_tcp_export_binds_loopback_and_needs_no_socket_group() -> None:
    report = load(SLEEPY)
    deploy = render_deploy_set(
        report, choose_variant(report, "sync-1-tcp"), DeployLayout("webapp"), source="r"
    )
    nginx_conf, gunicorn_conf = lines(deploy.files["nginx.conf"]), deploy.files["gunicorn.conf.py"]
    assert 'server "127.0.0.1:8000" fail_timeout=0;' in nginx_conf
    assert "bind = '127.0.0.1:8000'" in gunicorn_conf and "umask" not in gunicorn_conf
    assert "Group=webapp" in lines(deploy.files["webapp-app.service"])
    assert "sock" not in deploy.files["webapp-app.service"]


def test_uvicorn_export_is_a_command_line_in_the_unit() -> None:
    report = load(QUICK)
    stack = next(s for s in report.experiment.stacks if s.name == "nginx-unix")
    stack = stack.model_copy(
        update={"server": stack.server.model_copy(update={"kind": "uvicorn", "workers": 3})}
    )
    deploy = render_deploy_set(
        report, Choice(stack, "named", "test", ()), DeployLayout("api"), source="r"
    )
    assert "gunicorn.conf.py" not in deploy.files
    exec_start = next(
        line for line in lines(deploy.files["api-app.service"]) if line.startswith("ExecStart=")
    )
    assert exec_start.startswith(
        "ExecStart=/opt/api/venv/bin/python -m uvicorn servelab.apps.seed_fastapi:app "
        "--uds /run/api/app.sock"
    )
    for part in ("--workers 3", "--timeout-keep-alive 5", "--timeout-graceful-shutdown 30"):
        assert part in exec_start
    assert "Type=simple" in lines(deploy.files["api-app.service"])
    assert "uvicorn has no request timeout" in deploy.files["README.md"]
    assert "uvicorn makes its socket file rw for everyone" in deploy.files["README.md"]


def test_a_bad_deployment_name_is_refused() -> None:
    with pytest.raises(SpecError, match="not usable as a user, group and unit name"):
        export_result(load(SLEEPY), "best", Path("/nonexistent"), source="r", name="Web App")


def test_a_non_empty_output_directory_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "nginx.conf").write_text("mine")
    with pytest.raises(ServelabError, match="exists and is not empty"):
        export_result(load(SLEEPY), "best", tmp_path, source="r", check=False)
    assert (tmp_path / "nginx.conf").read_text() == "mine"


def test_a_variant_without_a_front_is_not_exported() -> None:
    report = load(SLEEPY)
    stack = report.experiment.baseline
    alone = stack.model_copy(update={"proxy": stack.proxy.model_copy(update={"kind": "none"})})
    with pytest.raises(SpecError, match="measured with proxy kind 'none'") as caught:
        render_deploy_set(report, Choice(alone, "named", "t", ()), DeployLayout("w"), source="r")
    assert "nginx or apache" in caught.value.problem


@pytest.mark.parametrize(
    "listen", ["80", "8080", "0.0.0.0:8080", "127.0.0.1:80", "*:80", "[::]:8080"]
)
def test_listen_addresses_nginx_takes_are_accepted(listen: str) -> None:
    assert check_listen(listen) == listen


def test_a_users_factory_app_is_exported_from_its_own_dir_and_venv(tmp_path: Path) -> None:
    """The files name the app dir and venv it was measured with, and call the factory as
    measured (gunicorn would otherwise pass the factory (environ, start_response))."""
    import dataclasses
    import subprocess
    import sys

    from servelab.config.stack import AppSpec

    package = tmp_path / "shopapp"
    package.mkdir()
    (package / "__init__.py").write_text(
        "def create_app():\n"
        "    def app(environ, start_response):\n"
        "        start_response('200 OK', [])\n"
        "        return [b'ok']\n"
        "    return app\n"
    )
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / ".venv")],
                   check=True)
    python = tmp_path / ".venv" / "bin" / "python"
    app = AppSpec(ref="shopapp:create_app", app_dir=tmp_path, python=python)
    report = load(SLEEPY)
    experiment = report.experiment
    stacks = [s.model_copy(update={"app": app}) for s in experiment.stacks]
    report = dataclasses.replace(report, experiment=experiment.model_copy(
        update={"baseline": stacks[0], "variants": tuple(stacks[1:])}
    ))
    choice = choose_variant(report, "best")
    layout = DeployLayout("shop", **app_places(choice.stack))
    files = render_deploy_set(report, choice, layout, source="result #3").files
    gunicorn_conf = lines(files["gunicorn.conf.py"])
    assert "wsgi_app = 'shopapp:create_app()'" in gunicorn_conf
    assert f"chdir = '{tmp_path}'" in gunicorn_conf
    assert f"pythonpath = '{tmp_path}'" in gunicorn_conf
    app_unit = lines(files["shop-app.service"])
    assert f"WorkingDirectory={tmp_path}" in app_unit
    assert f"ExecStart={tmp_path}/.venv/bin/gunicorn -c /etc/shop/gunicorn.conf.py" in app_unit
    # Its own places stay where they are when the set is staged for a check.
    assert {"app", "venv"}.isdisjoint(layout.machine_paths())
