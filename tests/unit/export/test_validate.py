"""servelab export: the real tools (nginx -t, gunicorn, systemd) accept the files."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from servelab.errors import ServelabError
from servelab.export import export_result, validate
from servelab.export.choose import choose_variant
from servelab.export.deploy import render_deploy_set
from servelab.export.layout import DeployLayout
from servelab.plugins.server import get_server
from servelab.report.base import ReportInput
from servelab.results.records import RunRecord

from .common import SLEEPY, load, systemd_complaints

needs_nginx = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")


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
        "booted: GET / through the exported nginx and app server answered HTTP 200",
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
    with pytest.raises(ServelabError, match="cannot use app 'no_such_module_x:app'"):
        export_result(bad, "sync-1-tcp", out, source="r")
    assert list(tmp_path.iterdir()) == []


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
        units.append(tmp_path / name)
    complaints = systemd_complaints(units)
    assert not complaints, "\n".join(complaints)


@needs_nginx
def test_a_booted_export_that_answers_otherwise_is_one_line(tmp_path: Path) -> None:
    """The check sends the measured request and expects the measured status."""
    from servelab.config.load import RequestSpec

    report = load(SLEEPY)
    deploy = render_deploy_set(
        report, choose_variant(report, "best"), DeployLayout("webapp"), source="r"
    )
    for name, text in deploy.files.items():
        (tmp_path / name).write_text(text)
    probe = RequestSpec(path="/", expect_status=201)  # the app answers 200
    server = get_server(deploy.stack.server.kind)
    with pytest.raises(ServelabError) as caught:
        validate.check_export(tmp_path, DeployLayout("webapp"), server, probe)
    problem = caught.value.problem
    assert problem.startswith("the exported stack did not answer GET / with HTTP 201: ")
    assert "answered the readiness request GET" in problem and "with HTTP 200" in problem
    assert "\n" not in caught.value.one_line()
