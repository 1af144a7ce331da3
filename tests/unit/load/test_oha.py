"""oha without running it: real captured outputs, built command lines, refusals."""

import pytest

from servelab.config.load import LoadSpec, RequestSpec
from servelab.load.oha import OhaDriver, OhaFlags, duration_arg, error_kind

from .common import BODY, GET, POST, URL, WORK, read

OHA_HELP_1_16 = (
    "  -w, --wait-ongoing-requests-after-deadline\n      --latency-correction\n"
    "      --no-tui\n      --disable-keepalive\n      --disable-compression\n"
    "      --output-format <OUTPUT_FORMAT>\n"
)

OHA_HELP_OLD = "  -j, --json    Print results as JSON\n      --no-tui\n"


def oha() -> OhaDriver:
    return OhaDriver(program="oha", help_text=OHA_HELP_1_16)


def test_oha_closed_model_run():
    m = oha().parse(read("oha.json"), "", LoadSpec(requests=2000))
    assert m.driver == "oha"
    assert m.requests_total == 2000
    assert m.duration_s == 0.02674556
    assert m.rps == pytest.approx(74778.767, abs=0.001)  # oha's requestsPerSec
    assert m.latency_mean_ms == pytest.approx(0.597042, abs=1e-6)
    assert m.latency_p50_ms == pytest.approx(0.416862)
    assert m.latency_p90_ms == pytest.approx(1.257465)
    assert m.latency_p99_ms == pytest.approx(3.247481)
    assert m.latency_max_ms == pytest.approx(4.200972)
    assert m.status_counts == {"200": 2000}
    assert m.connection_errors == {}
    assert m.bytes_received == 4000
    assert m.errors == 0
    assert m.driver_cpu_s == 0.0  # run_load fills it in


def test_oha_open_model_run_keeps_the_rate():
    m = oha().parse(read("oha_open.json"), "", LoadSpec(model="open", rate=500, duration_s=2))
    assert m.requests_total == 1000
    assert m.rps == pytest.approx(499.619, abs=0.001)
    assert m.latency_p99_ms == pytest.approx(0.159808)
    assert m.status_counts == {"200": 1000}


def test_oha_counts_each_status_code():
    m = oha().parse(read("oha_bad.json"), "", LoadSpec(requests=500))
    assert m.status_counts == {"502": 500}
    assert m.ok_responses == 0
    assert m.errors == 500
    assert m.connection_errors == {}
    assert m.bytes_received == 78500
    assert m.latency_p99_ms == pytest.approx(0.561356)


@pytest.mark.parametrize(
    ("fixture", "kind", "count"),
    [
        ("oha_closed.json", "connect", 50),
        ("oha_timeout.json", "timeout", 20),
        ("oha_reset.json", "reset", 50),
    ],
)
def test_oha_connection_errors_by_kind(fixture, kind, count):
    m = oha().parse(read(fixture), "", LoadSpec(requests=count))
    assert m.connection_errors == {kind: count}
    assert m.status_counts == {}
    assert m.requests_total == count
    assert m.errors == count
    # No request was answered: oha has no latency, reported as 0 rather than nan/None.
    assert (m.latency_mean_ms, m.latency_p99_ms, m.latency_max_ms) == (0.0, 0.0, 0.0)


def test_oha_leaves_out_requests_cut_at_the_deadline():
    m = oha().parse(read("oha_deadline.json"), "", LoadSpec(duration_s=1))
    assert m.connection_errors == {}  # 50 "aborted due to deadline" are not failures
    assert m.requests_total == 85527
    assert m.rps == pytest.approx(85527 / 1.001830274)
    assert m.latency_p99_ms == pytest.approx(2.529771)


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("Connection refused (os error 111)", "connect"),
        ("timeout", "timeout"),
        ("Connection timed out (os error 110)", "timeout"),
        ("connection error", "reset"),
        ("connection closed before message completed", "reset"),
        ("Connection reset by peer (os error 104)", "reset"),
        ("No record returned from DNS", "connect"),
        ("Redirection limit has reached", "other"),
    ],
)
def test_oha_error_kinds(message, kind):
    assert error_kind(message) == kind


def test_oha_command_closed_model():
    argv = oha().command(URL, GET, LoadSpec(concurrency=50, requests=2000), None, WORK)
    assert argv == [
        "oha", "--no-tui", "--output-format", "json", "--disable-compression",
        "-c", "50", "-n", "2000",
        "-t", "30s", "-m", "GET", URL,
    ]  # fmt: skip


def test_oha_command_open_model_with_duration_waits_for_requests_in_flight():
    load = LoadSpec(model="open", rate=250.5, concurrency=20, duration_s=2.5, timeout_s=5)
    argv = oha().command(URL, GET, load, None, WORK)
    assert argv[argv.index("-z") : argv.index("-z") + 3] == ["-z", "2500ms", "-w"]
    assert argv[argv.index("-q") : argv.index("-q") + 3] == ["-q", "250.5", "--latency-correction"]
    assert argv[argv.index("-c") + 1] == "20"  # the connection cap under the fixed rate
    assert "-n" not in argv
    assert argv[argv.index("-t") + 1] == "5s"


def test_oha_command_both_bounds_runs_for_the_duration():
    argv = oha().command(URL, GET, LoadSpec(requests=100, duration_s=3), None, WORK)
    assert "-n" not in argv  # oha refuses -n with -z
    assert argv[argv.index("-z") + 1] == "3s"


def test_oha_command_post_without_keepalive():
    argv = oha().command(URL, POST, LoadSpec(requests=10, keepalive=False), BODY, WORK)
    assert "--disable-keepalive" in argv
    assert argv[argv.index("-m") + 1] == "POST"
    assert argv[argv.index("-H") + 1] == "X-Trace: on"
    assert argv[argv.index("-T") + 1] == "application/json"
    assert argv[argv.index("-D") + 1] == str(BODY)
    assert argv[-1] == URL


def test_oha_command_asks_for_compression_only_through_the_request_headers():
    request = RequestSpec(headers={"Accept-Encoding": "gzip"})
    argv = oha().command(URL, request, LoadSpec(requests=10), None, WORK)
    assert "--disable-compression" in argv  # no Accept-Encoding of oha's own...
    assert argv[argv.index("-H") + 1] == "Accept-Encoding: gzip"  # ...only the workload's


def test_oha_command_without_body_sends_no_content_type():
    argv = oha().command(URL, GET, LoadSpec(requests=10), None, WORK)
    assert "-T" not in argv
    assert "-D" not in argv
    assert "--disable-keepalive" not in argv


def test_oha_old_versions_get_the_old_json_flag():
    flags = OhaFlags(OHA_HELP_OLD)
    assert flags.json == ["-j"]
    assert flags.wait_at_deadline == []
    assert flags.no_compression == []
    argv = OhaDriver(program="oha", help_text=OHA_HELP_OLD).command(
        URL, GET, LoadSpec(duration_s=2), None, WORK
    )
    assert argv[:6] == ["oha", "--no-tui", "-j", "-c", "100", "-z"]
    assert "-w" not in argv


def test_oha_duration_arguments():
    assert duration_arg(30.0) == "30s"
    assert duration_arg(0.25) == "250ms"
    assert duration_arg(1.5) == "1500ms"


def test_oha_supports_every_load():
    assert oha().unsupported(POST, LoadSpec(model="open", rate=10, requests=10)) is None
