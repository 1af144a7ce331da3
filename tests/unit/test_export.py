"""servelab export: which variant, what the files say, and that the real tools accept them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from support import run_cli

from servelab.config.stack import StackSpec
from servelab.errors import ServelabError, SpecError
from servelab.export import export_result, validate
from servelab.export.choose import Choice, NoClearWinnerError, choose_variant, rank
from servelab.export.deploy import DeployLayout, consistent_stack, render_deploy_set
from servelab.report.base import ReportInput
from servelab.results.records import RunRecord
from servelab.results.store import ResultStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "results"
SLEEPY = FIXTURES / "sleepy-workers"
QUICK = FIXTURES / "quick"
needs_nginx = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")


@cache
def load(path: Path) -> ReportInput:
    return ReportInput.from_store(ResultStore.open(path))


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


# --------------------------------------------------------------------------- choosing


def test_best_is_the_fastest_significantly_better_variant_without_errors() -> None:
    choice = choose_variant(load(SLEEPY), "best", source="sleepy")
    assert choice.name == "gthread-2x4-unix-keepalive"
    assert choice.how == "best"
    assert "better, +483.8 % (p = 0.045)" in choice.reason
    assert "next best: sync-4-unix, +298.7 %" in choice.reason
    assert [c.variant for c in choice.candidates] == [
        "gthread-2x4-unix-keepalive",
        "sync-4-unix",
    ]
    assert all(c.eligible for c in choice.candidates)


def test_a_variant_with_failed_requests_is_never_best() -> None:
    report = load(SLEEPY)
    runs = []
    for run in report.runs:
        if run.variant == "gthread-2x4-unix-keepalive" and run.repetition == 2:
            load_ = run.load.model_copy(update={"status_counts": {"200": 100, "502": 3}})
            run = RunRecord.model_validate({**run.model_dump(), "load": load_.model_dump()})
        runs.append(run)
    broken = ReportInput.build(report.experiment, report.environment, runs)
    choice = choose_variant(broken, "best")
    assert choice.name == "sync-4-unix"
    gthread = next(c for c in rank(broken) if c.variant == "gthread-2x4-unix-keepalive")
    assert not gthread.eligible
    assert gthread.reason.startswith("3 of ") and "HTTP 502: 3" in gthread.reason


def test_no_clear_winner_says_why_for_every_variant() -> None:
    with pytest.raises(NoClearWinnerError) as caught:
        choose_variant(load(QUICK), "best", source="result #7")
    error = caught.value
    assert error.problem.startswith("no clear winner in result #7")
    assert "--variant NAME (nginx-tcp, nginx-unix, nginx-unix-keepalive)" in error.fix
    assert "- nginx-unix: not significantly faster than the baseline on any workload" in (
        error.detail
    )
    assert "sync-small: no significant difference, +47.1 % (p = 0.26)" in error.detail


def test_a_variant_by_name_and_a_missing_one() -> None:
    choice = choose_variant(load(QUICK), "nginx-unix")
    assert choice.name == "nginx-unix" and choice.how == "named"
    with pytest.raises(ServelabError) as caught:
        choose_variant(load(QUICK), "nginx-udp", source="result #7")
    assert caught.value.problem == "no variant 'nginx-udp' in result #7"
    assert "nginx-tcp, nginx-unix, nginx-unix-keepalive" in caught.value.fix


# --------------------------------------------------------------------------- consistency


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


# --------------------------------------------------------------------------- the files


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


def test_single_knob_neighbours_justify_the_choice_with_numbers() -> None:
    report = load(QUICK)
    deploy = render_deploy_set(
        report, choose_variant(report, "nginx-unix"), DeployLayout("webapp"), source="r"
    )
    readme = deploy.files["README.md"]
    # nginx-tcp differs from nginx-unix only in the transport; keepalive-8 only in keepalive.
    assert "Against `nginx-tcp` (proxy.transport = tcp, all else equal)" in readme
    assert "- sync-small: 1,799.3 vs 1,222.8 requests/s (+47.1 %), no significant difference" in (
        readme
    )
    assert "Against `nginx-unix-keepalive` (proxy.upstream_keepalive = 8, all else equal)" in (
        readme
    )


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


# --------------------------------------------------------------------------- checks, writing


@needs_nginx
def test_export_is_checked_by_nginx_and_gunicorn_then_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch: list[Path] = []
    real_mkdtemp = validate.tempfile.mkdtemp

    def recording_mkdtemp(*args: object, **kwargs: object) -> str:
        path = real_mkdtemp(*args, **kwargs)  # type: ignore[arg-type]
        scratch.append(Path(path))
        return path

    monkeypatch.setattr(validate.tempfile, "mkdtemp", recording_mkdtemp)
    out = tmp_path / "deploy"
    outcome = export_result(load(SLEEPY), "best", out, source="result #3")
    assert outcome.checks == (
        "nginx -t accepts nginx.conf",
        "gunicorn --check-config accepts gunicorn.conf.py and loads the app",
    )
    assert sorted(p.name for p in out.iterdir()) == sorted(outcome.deploy.files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deploy"], "no staging dir left"
    assert scratch and not any(p.exists() for p in scratch), "the check's temp dir is removed"


@needs_nginx
def test_an_export_that_fails_its_check_writes_nothing(tmp_path: Path) -> None:
    report = load(SLEEPY)
    stack = report.experiment.baseline
    broken = stack.model_copy(
        update={"app": stack.app.model_copy(update={"ref": "no_such_module_x:app"})}
    )
    experiment = report.experiment.model_copy(update={"baseline": broken})
    runs = [
        RunRecord.model_validate({**r.model_dump(), "variant": broken.name}) for r in report.runs
    ]
    bad = ReportInput.build(experiment, report.environment, runs)
    out = tmp_path / "deploy"
    with pytest.raises(ServelabError, match="fails gunicorn --check-config"):
        export_result(bad, "sync-1-tcp", out, source="r")
    assert list(tmp_path.iterdir()) == []


def test_a_non_empty_output_directory_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "nginx.conf").write_text("mine")
    with pytest.raises(ServelabError, match="exists and is not empty"):
        export_result(load(SLEEPY), "best", tmp_path, source="r", check=False)
    assert (tmp_path / "nginx.conf").read_text() == "mine"


# --------------------------------------------------------------------------- CLI


servelab = run_cli  # in-process, as the shell sees it


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "no-such-result"], "no result 'no-such-result'"),
        (["report", "17"], "no result #17: there is no results database at"),
        (["export", str(SLEEPY), "--variant", "fastest"], "no variant 'fastest' in"),
        (["export", str(QUICK)], "no clear winner in"),
        (["export", str(SLEEPY), "--name", "Web App"], "is not usable as a user"),
    ],
)
def test_bad_input_is_one_clear_line(args: list[str], message: str, tmp_path: Path) -> None:
    done = servelab(*args, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    first = done.stderr.splitlines()[0]
    assert message in first and "(fix: " in first
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_cli_refuses_a_non_empty_out_and_writes_with_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.md").write_text("mine")
    done = servelab("report", str(SLEEPY), "--out", str(out))
    assert done.returncode == 2 and "exists and is not empty" in done.stderr
    assert (out / "report.md").read_text() == "mine"
    done = servelab("report", str(SLEEPY), "--out", str(out), "--overwrite")
    assert done.returncode == 0, done.stderr
    assert (out / "report.md").read_text().startswith("# sleepy-workers")
    assert (out / "report.html").is_file() and (out / "charts" / "rps.png").is_file()


def test_report_and_export_by_result_id(tmp_path: Path) -> None:
    """RESULT as an id of the results database, stored the way `servelab run` stores it."""
    source = ResultStore.open(SLEEPY)
    root = tmp_path / "results"
    store = ResultStore.create(root, source.experiment, source.environment)
    for run in source.runs():
        store.add(run)
    done = servelab("report", str(store.id), "--results", str(root))
    assert done.returncode == 0, done.stderr
    assert (store.path / "report" / "report.html").is_file()
    done = servelab("export", str(store.id), "--results", str(root), "--no-check")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("gthread-2x4-unix-keepalive: the best variant")
    readme = (store.path / "export" / "README.md").read_text()
    assert f"from #{store.id} ({store.path})" in readme


def test_a_variant_without_nginx_is_not_exported() -> None:
    report = load(SLEEPY)
    stack = report.experiment.baseline
    alone = stack.model_copy(update={"proxy": stack.proxy.model_copy(update={"kind": "none"})})
    with pytest.raises(SpecError, match="measured without nginx"):
        render_deploy_set(report, Choice(alone, "named", "t", ()), DeployLayout("w"), source="r")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_accepts_the_exported_units(tmp_path: Path) -> None:
    report = load(SLEEPY)
    deploy = render_deploy_set(
        report, choose_variant(report, "best"), DeployLayout("webapp"), source="r"
    )
    units = []
    for name in ("webapp-app.service", "webapp-nginx.service"):
        # systemd checks that ExecStart's program exists: point it at this machine's.
        text = deploy.files[name].replace(
            "/opt/webapp/venv/bin/gunicorn", str(Path(sys.executable).parent / "gunicorn")
        )
        (tmp_path / name).write_text(text)
        units.append(str(tmp_path / name))
    done = subprocess.run(
        ["systemd-analyze", "verify", *units],
        capture_output=True, text=True, timeout=60, check=False,
    )
    complaints = [
        line for line in (done.stdout + done.stderr).splitlines() if str(tmp_path) in line
    ]
    assert not complaints, "\n".join(complaints)
