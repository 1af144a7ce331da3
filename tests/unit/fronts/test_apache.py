"""Apache httpd as a front: spec validation, httpd.conf rendering (checked by ``apache2 -t``
where Apache is installed), mod_wsgi's script, log attribution of Apache's real lines,
and the memory split between Apache and mod_wsgi's daemons."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from support import memory_lines

from servelab.config.experiment import Experiment
from servelab.config.load import Workload
from servelab.config.stack import AppSpec, ProxySpec, ServerSpec, StackSpec
from servelab.errors import MissingToolError, SpecError, StackStartError
from servelab.fronts import apache, apache_conf, apache_user
from servelab.observe.attribution import classify_line, classify_lines, source_of
from servelab.plugins.front import get_front
from servelab.plugins.server import get_server
from servelab.prepare.building import experiment_from_dict
from servelab.prepare.checks import check_proxy, check_stack, describe_stack
from servelab.report.memory import memory_rows
from servelab.results.records import ProcessUsage, RunRecord

HAVE_APACHE = shutil.which("apache2") is not None or apache.FALLBACK_BINARY.exists()


@pytest.mark.parametrize(
    ("proxy", "message"),
    [
        ({"kind": "nginx", "mpm": "event"}, "mpm: Apache knob; set proxy kind 'apache'"),
        (
            {"kind": "none", "max_request_workers": 10, "threads_per_child": 5},
            "max_request_workers, threads_per_child: Apache knobs",
        ),
        ({"kind": "apache", "mpm": "prefork", "threads_per_child": 4}, "needs a threaded MPM"),
        ({"kind": "apache", "max_request_workers": 30}, "multiple of threads_per_child 25"),
        (
            {"kind": "apache", "mpm": "worker", "threads_per_child": 8, "max_request_workers": 20},
            "e.g. 16",
        ),
        (
            {"kind": "apache", "worker_processes": 2},
            "worker_processes: nginx knob; set proxy kind .nginx.",
        ),
        ({"kind": "apache", "buffering": True}, "buffering: nginx knob"),
    ],
)
def test_apache_knobs_are_checked(proxy: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_proxy(ProxySpec.model_validate(proxy))


def test_apache_defaults_and_shared_knobs_are_accepted() -> None:
    proxy = ProxySpec(kind="apache", worker_processes=1, gzip=False, upstream_keepalive=4)
    assert proxy.apache_mpm == "event" and proxy.mpm is None
    assert ProxySpec(kind="apache", mpm="prefork", max_request_workers=7).apache_mpm == "prefork"


@pytest.mark.parametrize(
    ("stack", "message"),
    [
        ({"server": {"kind": "mod_wsgi"}}, "runs the app inside Apache; set proxy kind 'apache'"),
        (
            {"server": {"kind": "mod_wsgi"}, "proxy": {"kind": "apache", "upstream_keepalive": 2}},
            "upstream_keepalive does not apply to mod_wsgi",
        ),
        (
            {
                "server": {"kind": "mod_wsgi", "max_requests": 10, "max_requests_jitter": 2},
                "proxy": {"kind": "apache"},
            },
            "mod_wsgi has no max_requests_jitter",
        ),
        (
            {"server": {"kind": "mod_wsgi", "worker_class": "sync"}, "proxy": {"kind": "apache"}},
            "mod_wsgi has no worker_class setting .worker_class is a knob of gunicorn.",
        ),
    ],
)
def test_mod_wsgi_stack_checks(stack: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_stack(StackSpec.model_validate(stack))


def test_bad_apache_knob_is_a_one_line_spec_error() -> None:
    data = {
        "name": "t",
        "baseline": {"proxy": {"kind": "nginx", "mpm": "worker"}},
        "workloads": [{"name": "w", "load": {"requests": 10}}],
    }
    with pytest.raises(SpecError) as caught:
        experiment_from_dict(data, source="t.toml")
    line = caught.value.one_line()
    assert "\n" not in line
    assert line.startswith("t.toml: baseline.proxy: mpm: Apache knob; set proxy kind 'apache'")


def test_describe_names_apache_and_mod_wsgi() -> None:
    proxied = StackSpec(
        proxy=ProxySpec(kind="apache", mpm="worker", max_request_workers=50, threads_per_child=25,
                        transport="unix", upstream_keepalive=8),
    )
    assert describe_stack(proxied) == (
        "apache[worker max_request_workers=50 threads_per_child=25] --unix--> "
        "gunicorn[uvicorn] workers=2 threads=1, upstream keepalive 8"
    )
    wsgi = StackSpec(server=ServerSpec(kind="mod_wsgi", workers=3, threads=4),
                     proxy=ProxySpec(kind="apache", mpm="prefork"))
    assert describe_stack(wsgi) == "apache[prefork] + mod_wsgi daemon processes=3 threads=4"


def _render(spec: StackSpec, tmp_path: Path, **kwargs: object) -> str:
    return apache_conf.render_httpd_conf(spec, workdir=tmp_path, listen_port=8123, **kwargs)  # type: ignore[arg-type]


def _check(text: str, tmp_path: Path) -> None:
    """apache2 -t accepts the config (where Apache is installed)."""
    if not HAVE_APACHE:
        return
    conf = tmp_path / "httpd.conf"
    conf.write_text(text)
    apache.apache_check(conf)


@pytest.mark.parametrize("mpm", ["prefork", "worker", "event"])
@pytest.mark.parametrize("keepalive", [0, 4])
def test_proxy_config_per_mpm(mpm: str, keepalive: int, tmp_path: Path) -> None:
    spec = StackSpec(proxy=ProxySpec(kind="apache", mpm=mpm, upstream_keepalive=keepalive))  # type: ignore[arg-type]
    text = _render(spec, tmp_path, target=apache_conf.proxy_target("http", port=9000))
    assert f"LoadModule mpm_{mpm}_module \"/usr/lib/apache2/modules/mod_mpm_{mpm}.so\"" in text
    assert 'LoadModule proxy_http_module "/usr/lib/apache2/modules/mod_proxy_http.so"' in text
    assert "wsgi" not in text.lower().replace("servelab", "")
    assert f'ServerRoot "{tmp_path}"' in text and f'PidFile "{tmp_path}/httpd.pid"' in text
    assert "Listen 127.0.0.1:8123" in text
    line = next(x for x in text.splitlines() if x.startswith("ProxyPass "))
    assert line.startswith('ProxyPass "/" "http://127.0.0.1:9000/" retry=0 timeout=65 ')
    if keepalive:
        assert line.endswith("max=4 ttl=60") and "disablereuse" not in line
    else:
        assert line.endswith("disablereuse=On")
    for directive in ("StartServers", "MaxRequestWorkers", "ThreadsPerChild", "ServerLimit"):
        assert f"\n{directive} " not in text  # Apache's own defaults
    _check(text, tmp_path)


def test_proxy_config_knobs_and_limits(tmp_path: Path) -> None:
    proxy = ProxySpec(
        kind="apache", mpm="event", threads_per_child=100, max_request_workers=2000,
        start_servers=3, timeout_s=7, client_keepalive_timeout_s=9, client_keepalive_requests=77,
        gzip_comp_level=2,
    )
    text = _render(StackSpec(proxy=proxy), tmp_path, target="http://127.0.0.1:1/")
    for line in (
        "StartServers 3", "ThreadsPerChild 100", "MaxRequestWorkers 2000",
        "ServerLimit 20", "ThreadLimit 100", "Timeout 7", "KeepAliveTimeout 9",
        "MaxKeepAliveRequests 77", "DeflateCompressionLevel 2",
        "AddOutputFilterByType DEFLATE application/json text/plain",
    ):
        assert f"\n{line}\n" in text, line
    _check(text, tmp_path)
    prefork = ProxySpec(kind="apache", mpm="prefork", max_request_workers=300, gzip=False,
                        client_keepalive_timeout_s=0)
    text = _render(StackSpec(proxy=prefork), tmp_path, target="http://127.0.0.1:1/")
    assert "\nServerLimit 300\n" in text and "\nKeepAlive Off\n" in text
    assert "DEFLATE" not in text and "mod_deflate" not in text
    _check(text, tmp_path)


def test_unix_socket_and_uwsgi_protocols(tmp_path: Path) -> None:
    sock = tmp_path / "app.sock"
    assert apache_conf.proxy_target("http", socket=sock) == f"unix:{sock}|http://localhost/"
    assert apache_conf.proxy_target("fastcgi", port=5) == "fcgi://127.0.0.1:5/"
    assert apache_conf.proxy_target("uwsgi", socket=sock) == f"unix:{sock}|uwsgi://localhost/"
    for protocol, module in (("fastcgi", "proxy_fcgi"), ("uwsgi", "proxy_uwsgi")):
        spec = StackSpec(server=ServerSpec(kind="uwsgi"),
                         proxy=ProxySpec(kind="apache", transport="unix", protocol=protocol))  # type: ignore[arg-type]
        text = _render(spec, tmp_path, target=apache_conf.proxy_target(protocol, socket=sock))
        assert f"LoadModule {module}_module" in text and "proxy_http" not in text
        assert "disablereuse=On" in text
        _check(text, tmp_path)


def test_run_as_user_only_as_root(tmp_path: Path) -> None:
    spec = StackSpec(proxy=ProxySpec(kind="apache"))
    who = apache_user.RunAs("www-data", "www-data", 33, 33)
    text = _render(spec, tmp_path, target="http://127.0.0.1:1/", who=who)
    assert "\nUser www-data\nGroup www-data\n" in text
    assert "\nUser " not in _render(spec, tmp_path, target="http://127.0.0.1:1/")


def test_missing_apache_is_a_missing_tool_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(apache, "FALLBACK_BINARY", tmp_path / "apache2")
    with pytest.raises(MissingToolError, match=r"apache2 .* is not installed") as caught:
        apache.apache_command(tmp_path / "httpd.conf")
    assert "apt-get install apache2" in caught.value.fix


def test_broken_config_is_a_stack_start_error(tmp_path: Path) -> None:
    if not HAVE_APACHE:
        pytest.skip("apache2 is not installed")
    conf = tmp_path / "httpd.conf"
    mpm = apache_conf.MODULES_DIR / "mod_mpm_event.so"
    conf.write_text(
        f'ServerRoot "{tmp_path}"\nLoadModule mpm_event_module "{mpm}"\nNoSuchDirective 1\n'
    )
    with pytest.raises(
        StackStartError, match=r"rejected the config .*line 3 .* Invalid command 'NoSuchDirective'"
    ):
        apache.apache_check(conf)


REAL_LINES = {
    # gunicorn stopped, TCP: 503
    "[Sun Nov 22 03:00:14.181226 2026] [proxy:error] [pid 9098:tid 9102] (111)Connection "
    "refused: AH00957: http: attempt to connect to 127.0.0.1:52975 (127.0.0.1:52975) failed":
        "upstream_refused",
    "[Sun Nov 22 03:00:14.181303 2026] [proxy_http:error] [pid 9098:tid 9102] [client "
    "127.0.0.1:47402] AH01114: HTTP: failed to make connection to backend: 127.0.0.1": None,
    # gunicorn stopped, unix socket (removed): 503
    "[Sun Nov 22 03:00:16.415723 2026] [proxy:error] [pid 9206:tid 9210] (2)No such file or "
    "directory: AH02454: http: attempt to connect to Unix domain socket "
    "/tmp/servelab-2j3pu9kx/app.sock (localhost:80) failed": "upstream_refused",
    # uWSGI stopped, FastCGI over TCP and the uwsgi protocol over a unix socket: 503
    "[Sun Nov 22 03:00:18.674787 2026] [proxy:error] [pid 9306:tid 9336] (111)Connection "
    "refused: AH00957: FCGI: attempt to connect to 127.0.0.1:35341 (127.0.0.1:35341) failed":
        "upstream_refused",
    "[Sun Nov 22 03:00:18.674866 2026] [proxy_fcgi:error] [pid 9306:tid 9336] [client "
    "127.0.0.1:53908] AH01079: failed to make connection to backend: 127.0.0.1": None,
    "[Sun Nov 22 03:00:19.263582 2026] [proxy_uwsgi:error] [pid 9414:tid 9419] [client "
    "127.0.0.1:49238] AH10101: failed to make connection to backend: localhost:0": None,
    # 1 sync worker, backlog 1, 12 clients, proxy timeout 1 s over TCP: connect timeouts (503)
    "[Sun Nov 22 03:02:24.625287 2026] [proxy:error] [pid 12119:tid 12161] (70007)The timeout "
    "specified has expired: AH00957: http: attempt to connect to 127.0.0.1:43767 "
    "(127.0.0.1:43767) failed": "connect_timeout",
    # ... and read timeouts (502: Apache answers a backend read timeout with 502)
    "[Sun Nov 22 03:00:47.174867 2026] [proxy_http:error] [pid 9880:tid 9911] (70007)The "
    "timeout specified has expired: [client 127.0.0.1:40410] AH01102: error reading status "
    "line from remote server 127.0.0.1:53917": "read_timeout",
    "[Sun Nov 22 03:00:47.175469 2026] [proxy:error] [pid 9880:tid 9911] [client "
    "127.0.0.1:40410] AH00898: Error reading from remote server returned by /": None,
    # the gunicorn worker SIGKILLed mid-request: 502
    "[Sun Nov 22 03:01:13.225381 2026] [proxy_http:error] [pid 10591:tid 10620] (20014)Internal "
    "error (specific information not available): [client 127.0.0.1:43904] AH01102: error "
    "reading status line from remote server 127.0.0.1:40835": "upstream_closed",
    # mod_wsgi: app slower than Timeout (504), daemon SIGKILLed mid-request (502)
    "[Sun Nov 22 03:01:06.578773 2026] [wsgi:error] [pid 10279:tid 10294] [client "
    "127.0.0.1:37274] [script /tmp/servelab-550tsgmy/app.wsgi] WSGI0145: Timeout when reading "
    "response headers from daemon process 'servelab'.": "read_timeout",
    "[Sun Nov 22 03:01:10.113026 2026] [wsgi:error] [pid 10460:tid 10517] [client "
    "127.0.0.1:35262] [script /tmp/servelab-s5fpfnem/app.wsgi] WSGI0147: Error reading "
    "response headers from daemon process 'servelab' (Connection reset by peer).":
        "upstream_reset",
    # mod_wsgi: the app raised (500), and what it printed to stderr
    "[Sun Nov 22 03:02:39.808156 2026] [wsgi:error] [pid 12502:tid 12590] [remote "
    "127.0.0.1:40642] WSGI0174: [script /tmp/servelab-ugvazd46/app.wsgi] RuntimeError exception "
    "raised processing WSGI script '/tmp/servelab-ugvazd46/app.wsgi' for main interpreter of "
    "daemon process 'servelab'.": "app_error",
    "[Sun Nov 22 03:02:39.807992 2026] [wsgi:error] [pid 12502:tid 12590] [remote "
    "127.0.0.1:40642] [script /tmp/servelab-ugvazd46/app.wsgi] a line the app prints": None,
    "[Sun Nov 22 03:02:39.808158 2026] [wsgi:error] [pid 12502:tid 12590] [remote "
    "127.0.0.1:40642] RuntimeError: boom": None,
    # Apache worker MPM + mod_wsgi under ab -c 500 (the apache-vs-nginx study)
    "[Sun Nov 22 03:18:23.249150 2026] [mpm_worker:error] [pid 4534:tid 4534] AH00286: server "
    "reached MaxRequestWorkers setting, consider raising the MaxRequestWorkers setting":
        "front_busy",
    # start-up and shutdown
    "[Sun Nov 22 02:56:29.661683 2026] [mpm_event:notice] [pid 5733:tid 5733] AH00489: "
    "Apache/2.4.71 (Debian) configured -- resuming normal operations": None,
    "[Sun Nov 22 02:51:53.184996 2026] [core:warn] [pid 3041:tid 3041] AH00045: child process "
    "3045 still did not exit, sending a SIGTERM": "other",
}


@pytest.mark.parametrize("line", list(REAL_LINES))
def test_apache_lines_are_classified(line: str) -> None:
    assert source_of("apache") == "apache"
    assert classify_line(line, "apache") == REAL_LINES[line]


def test_each_failed_request_counts_once() -> None:
    lines = [line for line in REAL_LINES if "9098" in line or "9880" in line]
    events = classify_lines(lines, "apache")
    assert events.counts == {"upstream_refused": 1, "read_timeout": 1}
    error = [line for line in REAL_LINES if "12502" in line]
    assert classify_lines(error, "apache").counts == {"app_error": 1}


def _usage(role: str, pid: int, mib: int) -> ProcessUsage:
    return ProcessUsage(role=role, pid=pid, name="apache2", cpu_s=0, peak_rss_bytes=mib << 20)


def test_memory_counts_mod_wsgi_daemons_as_workers_and_apache_as_front() -> None:
    exp = Experiment(
        name="fronts",
        baseline=StackSpec(name="nginx-gunicorn", app=AppSpec(ref="sleepy")),
        variants=(
            StackSpec(name="mod_wsgi", app=AppSpec(ref="sleepy"),
                      server=ServerSpec(kind="mod_wsgi", workers=2),
                      proxy=ProxySpec(kind="apache")),
        ),
        workloads=(Workload(name="w"),),
    )
    procs = (
        _usage("apache", 1, 7), _usage("apache", 4, 6), _usage("apache", 5, 6),
        _usage("app", 2, 32), _usage("app", 3, 30),
    )
    runs = [
        RunRecord.model_construct(variant="mod_wsgi", workload="w", processes=procs),
        RunRecord.model_construct(
            variant="nginx-gunicorn", workload="w",
            processes=(ProcessUsage(role="nginx", pid=1, name="nginx", cpu_s=0,
                                    peak_rss_bytes=5 << 20), _usage("app", 2, 40)),
        ),
    ]
    rows = {r.variant: r for r in memory_rows(exp, runs)}
    wsgi = rows["mod_wsgi"]
    assert (wsgi.app_processes, wsgi.app_mib, wsgi.per_worker_mib) == (2, 62, 31)
    assert (wsgi.front, wsgi.front_mib, wsgi.nginx_mib) == ("apache", 19, 19)
    assert rows["nginx-gunicorn"].front_mib == 5
    text = "\n".join(memory_lines(exp, runs))  # same app, different fronts: shown
    assert "| Front [MiB]" in text and "| apache " in text


def test_doctor_reports_apache_and_mod_wsgi() -> None:
    (front,) = get_front("apache").doctor_checks()
    (wsgi,) = get_server("mod_wsgi").doctor_checks()
    assert front.name.startswith("apache2") and wsgi.name.startswith("mod_wsgi")
    if HAVE_APACHE:
        assert front.status == "ok" and "Apache/2.4" in front.found


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Apache's children switch user)")
def test_only_servelabs_own_sqlite_dir_is_opened() -> None:
    who = apache_user.run_as()
    private = Path(tempfile.mkdtemp(prefix=apache_user.SQLITE_DIR_PREFIX))
    other = Path(tempfile.mkdtemp(prefix="servelab-test-"))
    try:
        for directory in (private, other):
            (directory / "db.sqlite3").write_text("")
        apache_user.open_database({apache_user.SQLITE_ENV: str(private / "db.sqlite3")}, who)
        assert private.stat().st_mode & 0o777 == 0o770 and private.stat().st_gid == who.gid
        before = other.stat()
        with pytest.raises(StackStartError, match="cannot read"):
            apache_user.open_database({apache_user.SQLITE_ENV: str(other / "db.sqlite3")}, who)
        after = other.stat()
        assert (after.st_mode, after.st_gid) == (before.st_mode, before.st_gid)
    finally:
        shutil.rmtree(private)
        shutil.rmtree(other)


def test_apache_listens_on_loopback_unless_told(tmp_path: Path) -> None:
    spec = StackSpec(proxy=ProxySpec(kind="apache"))
    target = "http://127.0.0.1:9000/"
    assert "Listen 127.0.0.1:8123" in _render(spec, tmp_path, target=target)
    assert "Listen 10.0.0.5:8123" in _render(spec, tmp_path, target=target, listen_host="10.0.0.5")
