"""Exported configs boot: nginx + the app server from the exported files serve a request.

The exported set is moved into a temporary directory (its /etc, /run, /var/lib
and /opt paths rewritten there, free loopback ports instead of port 80 and
8000), then the app server is started from the unit's own ExecStart line and
environment and nginx from the exported nginx.conf, and a real request goes
through both. Both are stopped and reaped, and the directory removed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import tempfile
import urllib.request
from pathlib import Path

import pytest
from support import report_with_stack

from servelab.config.load import RequestSpec
from servelab.export import DeployLayout, export_result
from servelab.export.choose import Choice
from servelab.export.deploy import render_deploy_set
from servelab.export.validate import boot, stage
from servelab.fronts.apache import FALLBACK_BINARY
from servelab.report.base import ReportInput
from servelab.results.store import ResultStore

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed"),
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "results"


@pytest.fixture
def scratch() -> Path:
    """A short directory in /tmp (a unix socket path must fit in 108 bytes); removed after."""
    path = Path(tempfile.mkdtemp(prefix="servelab-boot-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
    assert not path.exists()


def _get(url: str, request: RequestSpec) -> tuple[int, bytes]:
    data = request.body.encode() if request.body else None
    headers = {"Content-Type": request.content_type} if data else {}
    req = urllib.request.Request(url + request.path, data=data, headers=headers,
                                 method=request.method)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=10) as response:
        return response.status, response.read()


def test_best_export_boots_over_its_unix_socket(scratch: Path, no_leftover_processes) -> None:
    report = ReportInput.from_store(ResultStore.open(FIXTURES / "sleepy-workers"))
    exported = scratch / "export"
    outcome = export_result(report, "best", exported, source="sleepy-workers", name="webapp")
    assert outcome.choice.name == "gthread-2x4-unix-keepalive"

    staged = stage(exported, DeployLayout("webapp"), scratch / "root", for_boot=True)
    assert isinstance(staged.app_address, Path)  # a unix socket
    probe = report.experiment.workloads[0].request
    with boot(staged, probe) as url:
        for _ in range(3):  # several requests: nginx reuses its upstream keepalive connections
            status, body = _get(url, probe)
            assert (status, body) == (200, b"ok\n")
        mode = os.stat(staged.app_address).st_mode
        assert stat.S_ISSOCK(mode)
        # gunicorn's exported umask 007: rw for owner and group, nothing for others.
        assert stat.S_IMODE(mode) & 0o007 == 0 and stat.S_IMODE(mode) & 0o060 == 0o060
        processes = len(no_leftover_processes)
    assert processes >= 2  # the app server and nginx, both recorded and checked afterwards
    assert not staged.app_address.exists(), "gunicorn removes its socket on a clean stop"
    app_log = (scratch / "root" / "app.log").read_text()
    assert "Using worker: gthread" in app_log and "Booting worker" in app_log


def test_uvicorn_tcp_export_boots(scratch: Path) -> None:
    report = ReportInput.from_store(ResultStore.open(FIXTURES / "quick"))
    tcp = report.experiment.baseline
    stack = tcp.model_copy(
        update={"server": tcp.server.model_copy(update={"kind": "uvicorn", "workers": 1})}
    )
    layout = DeployLayout("api", listen="8080")
    deploy = render_deploy_set(report, Choice(stack, "named", "test", ()), layout, source="t")
    exported = scratch / "export"
    exported.mkdir()
    for name, text in deploy.files.items():
        (exported / name).write_text(text)

    staged = stage(exported, layout, scratch / "root", for_boot=True)
    assert isinstance(staged.app_address, tuple)  # TCP on loopback
    workload = report.experiment.workloads[0]  # POST /sync/items/ with the seed's Item body
    with boot(staged, workload.request) as url:
        status, body = _get(url, workload.request)
    assert status == 200
    assert json.loads(body)["name"] == "string"


HAVE_APACHE = shutil.which("apache2") is not None or FALLBACK_BINARY.exists()
NOT_GUNICORN = {"worker_class": "uvicorn"}  # a gunicorn knob the others refuse
# (server knobs, proxy knobs, what must be installed): each server and front export can
# pick, on the sleepy app's best variant (a unix socket, upstream keepalive 8).
EXPORTS = {
    "granian": ({"kind": "granian", "workers": 1, "threads": 1, **NOT_GUNICORN}, {}, "granian"),
    "hypercorn": (
        {"kind": "hypercorn", "workers": 1, "threads": 1, **NOT_GUNICORN}, {}, "hypercorn"
    ),
    "uwsgi-uwsgi-protocol": (
        {"kind": "uwsgi", "workers": 1, **NOT_GUNICORN},
        {"protocol": "uwsgi", "upstream_keepalive": 0},
        "pyuwsgi",
    ),
    "apache-gunicorn": ({"workers": 1}, {"kind": "apache"}, "apache2"),
    "apache-mod_wsgi": (
        {"kind": "mod_wsgi", "workers": 1, **NOT_GUNICORN},
        {"kind": "apache", "upstream_keepalive": 0},
        "mod_wsgi",
    ),
}


def _missing(what: str) -> bool:
    if what == "apache2":
        return not HAVE_APACHE
    return importlib.util.find_spec(what) is None or (what == "mod_wsgi" and not HAVE_APACHE)


@pytest.mark.parametrize("case", EXPORTS)
def test_every_server_and_front_exports_a_set_that_boots(
    case: str, scratch: Path, no_leftover_processes
) -> None:
    """export_result's check runs the front's and the server's own checks on the staged
    files, then boots them and sends the measured request through the front."""
    server, proxy, needs = EXPORTS[case]
    if _missing(needs):
        pytest.skip(f"{needs} is not installed")
    variant = "gthread-2x4-unix-keepalive"
    report = report_with_stack(
        ReportInput.from_store(ResultStore.open(FIXTURES / "sleepy-workers")), variant,
        server=server, proxy=proxy,
    )
    outcome = export_result(report, variant, scratch / "export", source="t", name="shop")
    assert outcome.checks[-1].startswith("booted: GET / through the exported ")
    assert outcome.checks[-1].endswith("answered HTTP 200")
    front_check = "apache2 -t accepts httpd.conf" if "apache" in case else "nginx -t accepts"
    assert outcome.checks[0].startswith(front_check)
    # The app server and the front, or the front alone when it runs the app (mod_wsgi).
    assert len(no_leftover_processes) == (1 if "mod_wsgi" in case else 2)
