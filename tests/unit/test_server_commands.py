"""granian, hypercorn and uWSGI: command lines, validation errors, nginx's uwsgi and
FastCGI modes (checked by the real ``nginx -t``), the shootout study and its memory table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support import fake_run

from servelab.apps import ResolvedApp
from servelab.config.building import experiment_from_dict
from servelab.config.stack import ProxySpec, ServerSpec, StackSpec
from servelab.errors import SpecError
from servelab.fronts import nginx
from servelab.report.memory import memory_markdown, memory_rows
from servelab.results.records import ProcessUsage, RunRecord
from servelab.servers import granian, hypercorn, installed, uwsgi
from servelab.studies import StudyOptions, get_study

ASGI = ResolvedApp("servelab.apps.seed_fastapi:app", "asgi", None, is_factory=False)
WSGI = ResolvedApp("servelab.apps.sleepy_wsgi:app", "wsgi", None, is_factory=False)
FACTORY = ResolvedApp("mypkg.app:create", "asgi", Path("/srv/app"), is_factory=True)


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


# ------------------------------------------------------------------ command lines


def test_granian_command_tcp_asgi() -> None:
    server = ServerSpec(kind="granian", workers=3, threads=2, blocking_threads=4, backlog=256)
    argv = granian.granian_command(server, ASGI, port=8123)
    assert argv[1:3] == ["-m", "granian"] and argv[-1] == ASGI.import_path
    assert (_after(argv, "--host"), _after(argv, "--port")) == ("127.0.0.1", "8123")
    assert _after(argv, "--interface") == "asgi"
    assert _after(argv, "--workers") == "3"
    assert _after(argv, "--runtime-threads") == "2"
    assert _after(argv, "--blocking-threads") == "4"
    assert _after(argv, "--backlog") == "256"
    assert "--uds" not in argv


def test_granian_command_unix_wsgi_and_factory(tmp_path: Path) -> None:
    sock = tmp_path / "app.sock"
    argv = granian.granian_command(ServerSpec(kind="granian"), WSGI, socket=sock)
    assert _after(argv, "--uds") == str(sock) and _after(argv, "--interface") == "wsgi"
    assert "--blocking-threads" not in argv  # granian's own default
    argv = granian.granian_command(ServerSpec(kind="granian"), FACTORY, port=1)
    assert "--factory" in argv and _after(argv, "--working-dir") == "/srv/app"


def test_hypercorn_command() -> None:
    server = ServerSpec(kind="hypercorn", workers=2, max_requests=100, max_requests_jitter=10)
    argv = hypercorn.hypercorn_command(server, ASGI, socket=Path("/tmp/x/app.sock"))
    assert _after(argv, "--bind") == "unix:/tmp/x/app.sock"
    assert _after(argv, "--workers") == "2"
    assert _after(argv, "--max-requests") == "100"
    assert _after(argv, "--max-requests-jitter") == "10"
    assert _after(argv, "--error-logfile") == "-"  # into the stack's log file
    assert argv[-1] == ASGI.import_path
    tcp = hypercorn.hypercorn_command(ServerSpec(kind="hypercorn"), FACTORY, port=9000)
    assert _after(tcp, "--bind") == "127.0.0.1:9000" and tcp[-1] == "mypkg.app:create()"


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


def test_commands_refuse_another_kind() -> None:
    with pytest.raises(ValueError, match="not granian"):
        granian.granian_command(ServerSpec(kind="hypercorn"), ASGI, port=1)
    with pytest.raises(ValueError, match="not hypercorn"):
        hypercorn.hypercorn_command(ServerSpec(kind="granian"), ASGI, port=1)
    with pytest.raises(ValueError, match="not uwsgi"):
        uwsgi.uwsgi_command(ServerSpec(kind="granian"), WSGI, port=1)


def test_server_not_installed_is_a_clear_error() -> None:
    with pytest.raises(SpecError, match="app server nosuchserver is not installed"):
        installed.require_module("nosuchserver")
    with pytest.raises(SpecError, match="app server nosuchserver is not installed"):
        installed.require_script("nosuchserver")


# ------------------------------------------------------------------ validation


def _spec_error(data: dict[str, object]) -> str:
    doc = {
        "name": "t",
        "baseline": data,
        "workloads": [{"name": "w", "load": {"requests": 10}}],
    }
    with pytest.raises(SpecError) as info:
        experiment_from_dict(doc)
    return str(info.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"server": {"kind": "hypercorn", "threads": 2}}, "hypercorn has no threads"),
        (
            {"server": {"kind": "gunicorn", "blocking_threads": 2}},
            "gunicorn has no blocking_threads setting (blocking_threads is a knob of granian)",
        ),
        (
            {"server": {"kind": "granian", "worker_class": "sync"}},
            "granian has no worker_class setting (worker_class is a knob of gunicorn)",
        ),
        ({"server": {"kind": "granian", "max_requests": 10}}, "granian has no max_requests"),
        ({"server": {"kind": "granian", "backlog": 64}}, "granian needs backlog >= 128"),
        (
            {"server": {"kind": "uwsgi", "max_requests": 9, "max_requests_jitter": 2}},
            "uwsgi has no max_requests_jitter",
        ),
        ({"server": {"kind": "waitress"}}, "kind"),
        ({"proxy": {"protocol": "uwsgi"}}, "spoken by 'uwsgi' only, not gunicorn"),
        (
            {"server": {"kind": "uwsgi"}, "proxy": {"kind": "none", "protocol": "fastcgi"}},
            "needs a front that speaks it (proxy kind 'nginx' or 'apache')",
        ),
        (
            {"server": {"kind": "uwsgi"}, "proxy": {"protocol": "uwsgi", "upstream_keepalive": 4}},
            "upstream_keepalive is measured over HTTP only",
        ),
    ],
)
def test_bad_server_knobs_are_one_line_errors(data: dict[str, object], message: str) -> None:
    text = _spec_error(data)
    assert message in text
    assert "\n" not in text.split(" (hint")[0].strip()


def test_describe_names_server_and_protocol() -> None:
    spec = StackSpec(
        server=ServerSpec(kind="uwsgi", workers=2, threads=4),
        proxy=ProxySpec(transport="unix", protocol="fastcgi"),
    )
    assert spec.describe().startswith("nginx --unix/fastcgi--> uwsgi workers=2 threads=4")
    granian_spec = StackSpec(server=ServerSpec(kind="granian", blocking_threads=3))
    assert "granian workers=2 threads=1 blocking_threads=3" in granian_spec.describe()


# ------------------------------------------------------------------ nginx modes


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


# ------------------------------------------------------------------ study and memory


def test_server_shootout_study() -> None:
    exp = get_study("server-shootout").build(StudyOptions(duration_s=2, workers=(3,)))
    assert [s.server.kind for s in exp.stacks] == ["gunicorn", "uvicorn", "granian", "hypercorn"]
    assert {s.server.workers for s in exp.stacks} == {3}
    assert {s.proxy.transport for s in exp.stacks} == {"unix"}
    assert {s.server.backlog for s in exp.stacks} == {128}
    assert len(exp.workloads) == 4


def _run(variant: str, app_mib: list[int], nginx_mib: int) -> RunRecord:
    procs = [
        ProcessUsage(role="nginx", pid=1, name="nginx", cpu_s=0, peak_rss_bytes=nginx_mib << 20)
    ]
    procs += [
        ProcessUsage(role="app", pid=10 + i, name="x", cpu_s=0, peak_rss_bytes=m << 20)
        for i, m in enumerate(app_mib)
    ]
    return fake_run(variant, processes=tuple(procs))


def test_memory_per_worker() -> None:
    exp = get_study("server-shootout").build(StudyOptions(duration_s=2))
    runs = [
        _run("gunicorn-uvicorn", [30, 60, 60], 4),
        _run("gunicorn-uvicorn", [30, 62, 62], 6),
        _run("granian", [20, 40, 40], 4),
    ]
    rows = {r.variant: r for r in memory_rows(exp, runs)}
    assert set(rows) == {"gunicorn-uvicorn", "granian"}  # no runs, no row
    gunicorn = rows["gunicorn-uvicorn"]
    assert gunicorn.app_mib == pytest.approx(152.0)
    assert gunicorn.per_worker_mib == pytest.approx(76.0)
    assert gunicorn.largest_mib == pytest.approx(61.0)
    assert gunicorn.nginx_mib == pytest.approx(5.0)
    text = "\n".join(memory_markdown(exp, runs))
    assert "## Memory per worker" in text and "| granian " in text


def test_memory_section_only_when_servers_differ() -> None:
    exp = get_study("port-vs-socket").build(StudyOptions(requests=10))
    assert memory_markdown(exp, [_run("nginx-tcp", [10, 20], 3)]) == []


def test_export_refuses_the_new_servers_clearly() -> None:
    from servelab.export.choose import Choice
    from servelab.export.deploy import render_deploy_set

    stack = StackSpec(name="granian", server=ServerSpec(kind="granian"))
    choice = Choice(stack=stack, how="named", reason="", candidates=())
    with pytest.raises(SpecError, match="runs granian; servelab exports gunicorn and uvicorn"):
        render_deploy_set(None, choice, None, source="t")  # type: ignore[arg-type]


def test_wsgi_shootout_study() -> None:
    exp = get_study("wsgi-shootout").build(StudyOptions(sleep_s=0.02, workers=(3,)))
    assert [(s.server.kind, s.proxy.protocol) for s in exp.stacks] == [
        ("gunicorn", "http"), ("granian", "http"),
        ("uwsgi", "http"), ("uwsgi", "uwsgi"), ("uwsgi", "fastcgi"),
    ]
    assert {s.server.workers for s in exp.stacks} == {3}
    assert {s.app.ref for s in exp.stacks} == {"sleepy"}
    assert {s.app.env["SERVELAB_SLEEP_S"] for s in exp.stacks} == {"0.02"}
    assert exp.stacks[0].server.worker_class == "sync"
    default = get_study("wsgi-shootout").build(StudyOptions())
    assert default.stacks[0].app.env["SERVELAB_SLEEP_S"] == "0"
    assert default.workloads[0].load.duration_s == 5.0
