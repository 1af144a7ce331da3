"""Load drivers without running them: real captured outputs, built command lines, refusals.

The fixtures are real runs (see tests/fixtures/load/README.md); the expected
figures below were read off the files by eye.
"""

from pathlib import Path

import pytest

from servelab.config.load import LoadSpec, RequestSpec
from servelab.errors import SpecError
from servelab.load.ab import AbDriver
from servelab.load.base import run_load
from servelab.load.oha import OhaDriver, OhaFlags, duration_arg, error_kind
from servelab.load.wrk import SCRIPT_NAME, WrkDriver, script_path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "load"
OHA_HELP_1_16 = (
    "  -w, --wait-ongoing-requests-after-deadline\n      --latency-correction\n"
    "      --no-tui\n      --disable-keepalive\n      --disable-compression\n"
    "      --output-format <OUTPUT_FORMAT>\n"
)
OHA_HELP_OLD = "  -j, --json    Print results as JSON\n      --no-tui\n"
URL = "http://127.0.0.1:8080/items"
GET = RequestSpec()
POST = RequestSpec(method="POST", path="/items", body='{"a": 1}', headers={"X-Trace": "on"})
BODY = Path("/work/body")
WORK = Path("/work")


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def oha() -> OhaDriver:
    return OhaDriver(program="oha", help_text=OHA_HELP_1_16)


# ---------------------------------------------------------------- oha output


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


# ---------------------------------------------------------------- oha command


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


# ---------------------------------------------------------------- ab output


def test_ab_seed_parity_run():
    m = AbDriver(program="ab").parse(read("ab.txt"), "", LoadSpec(requests=5000))
    assert m.driver == "ab"
    assert m.requests_total == 5000
    assert m.duration_s == 0.302
    assert m.rps == 16536.09
    assert m.latency_mean_ms == 6.0  # Connection Times "Total" mean, not "Time per request"
    assert (m.latency_p50_ms, m.latency_p90_ms, m.latency_p99_ms) == (6.0, 7.0, 15.0)
    assert m.latency_max_ms == 16.0
    assert m.status_counts == {"2xx": 5000}
    assert m.connection_errors == {}
    assert m.bytes_received == 740000


def test_ab_keepalive_run():
    m = AbDriver(program="ab").parse(read("ab_keepalive.txt"), "", LoadSpec(requests=20000))
    assert m.requests_total == 20000
    assert m.rps == 113646.70
    assert (m.latency_p99_ms, m.latency_max_ms) == (1.0, 2.0)
    assert m.status_counts == {"2xx": 20000}
    assert m.bytes_received == 2980000


def test_ab_non_2xx_answers_are_error_responses():
    m = AbDriver(program="ab").parse(read("ab_bad.txt"), "", LoadSpec(requests=2000))
    assert m.status_counts == {"non-2xx": 2000}
    assert m.connection_errors == {}
    assert m.errors == 2000
    assert m.rps == 104487.75


def test_ab_length_failures_are_answered_requests():
    m = AbDriver(program="ab").parse(read("ab_length.txt"), "", LoadSpec(requests=2000))
    assert m.status_counts == {"2xx": 2000}  # "Failed requests: 200 (Length: 200)"
    assert m.connection_errors == {}
    assert m.errors == 0


def test_ab_receive_failures_are_counted_once():
    m = AbDriver(program="ab").parse(read("ab_reset.txt"), "", LoadSpec(requests=200))
    # "Failed requests: 400 (Receive: 200, Exceptions: 200)": the same 200 requests.
    assert m.connection_errors == {"read": 200}
    assert m.status_counts == {}
    assert m.requests_total == 200
    assert m.errors == 200


def test_ab_counts_refused_connections_as_read_errors():
    m = AbDriver(program="ab").parse(read("ab_closed.txt"), "", LoadSpec(requests=100))
    # "Failed requests: 150 (Receive: 100, Exceptions: 50)": ab connects without
    # blocking, so the refusal surfaces when reading.
    assert m.connection_errors == {"read": 100}
    assert m.requests_total == 100
    assert m.ok_responses == 0


def test_ab_output_without_figures_is_an_error():
    with pytest.raises(ValueError):
        AbDriver(program="ab").parse("apr_socket_connect(): Connection refused", "", LoadSpec())


# ---------------------------------------------------------------- ab command


def test_ab_command_seed_parity():
    load = LoadSpec(concurrency=100, requests=5000, keepalive=False)
    argv = AbDriver(program="ab").command(
        URL, RequestSpec(method="POST", body="{}"), load, BODY, WORK
    )
    assert argv == [
        "ab", "-q", "-r", "-c", "100", "-n", "5000", "-s", "30",
        "-p", str(BODY), "-T", "application/json", URL,
    ]  # fmt: skip


def test_ab_command_keepalive_duration_and_count():
    load = LoadSpec(concurrency=10, requests=300, duration_s=5, timeout_s=2.5)
    argv = AbDriver(program="ab").command(URL, GET, load, None, WORK)
    assert "-k" in argv
    # -t before -n, or ab's -t resets the count to 50000.
    assert argv[argv.index("-t") : argv.index("-t") + 4] == ["-t", "5", "-n", "300"]
    assert argv[argv.index("-s") + 1] == "3"  # whole seconds, rounded up


def test_ab_command_duration_only_is_not_capped_at_50000():
    argv = AbDriver(program="ab").command(URL, GET, LoadSpec(duration_s=10), None, WORK)
    assert argv.index("-t") < argv.index("-n")
    assert int(argv[argv.index("-n") + 1]) > 50000


@pytest.mark.parametrize(
    ("request_spec", "expected"),
    [
        (RequestSpec(method="PUT", body="x", content_type="text/plain"),
         ["-u", str(BODY), "-T", "text/plain"]),
        (RequestSpec(method="PATCH", body="x"),
         ["-p", str(BODY), "-m", "PATCH", "-T", "application/json"]),
        (RequestSpec(method="DELETE"), ["-m", "DELETE"]),
        (RequestSpec(method="HEAD"), ["-i"]),
    ],
)  # fmt: skip
def test_ab_command_methods(request_spec, expected):
    body = BODY if request_spec.body is not None else None
    argv = AbDriver(program="ab").command(URL, request_spec, LoadSpec(requests=1), body, WORK)
    start = argv.index(expected[0])
    assert argv[start : start + len(expected)] == expected


def test_ab_command_headers():
    argv = AbDriver(program="ab").command(URL, POST, LoadSpec(requests=1), BODY, WORK)
    assert argv[argv.index("-H") + 1] == "X-Trace: on"


def test_ab_cannot_do_the_open_model():
    reason = AbDriver(program="ab").unsupported(GET, LoadSpec(model="open", rate=100, requests=10))
    assert reason is not None
    assert "open model" in reason


def test_ab_cannot_do_fractional_durations():
    reason = AbDriver(program="ab").unsupported(GET, LoadSpec(duration_s=1.5))
    assert reason is not None
    assert "whole seconds" in reason
    assert AbDriver(program="ab").unsupported(GET, LoadSpec(duration_s=2)) is None


def test_run_load_refuses_an_unsupported_load_before_running_anything(tmp_path):
    with pytest.raises(SpecError, match="ab cannot do this: ab has no fixed-rate"):
        run_load(
            AbDriver(program="/nonexistent/ab"),
            URL,
            GET,
            LoadSpec(model="open", rate=100, requests=10),
            tmp_path,
        )


# ---------------------------------------------------------------- wrk output


def test_wrk_run():
    m = WrkDriver(program="wrk").parse(read("wrk.txt"), "", LoadSpec(duration_s=2))
    assert m.driver == "wrk"
    assert m.requests_total == 240568
    assert m.duration_s == 2.002554
    assert m.rps == pytest.approx(240568 / 2.002554)
    assert m.latency_mean_ms == pytest.approx(0.595777)
    assert (m.latency_p50_ms, m.latency_p90_ms) == (0.163, 2.021)
    assert m.latency_p99_ms == 4.145
    assert m.latency_max_ms == 8.33
    assert m.status_counts == {"2xx/3xx": 240568}
    assert m.connection_errors == {}
    assert m.bytes_received == 35843507


def test_wrk_status_errors_are_error_responses():
    m = WrkDriver(program="wrk").parse(read("wrk_bad.txt"), "", LoadSpec(duration_s=1))
    assert m.status_counts == {"4xx/5xx": 112413}
    assert m.errors == 112413
    assert m.ok_responses == 0


def test_wrk_post_without_keepalive():
    m = WrkDriver(program="wrk").parse(read("wrk_post_close.txt"), "", LoadSpec(duration_s=1))
    assert m.status_counts == {"2xx/3xx": 29146}
    assert m.latency_p99_ms == 0.651
    assert m.errors == 0


def test_wrk_socket_errors():
    m = WrkDriver(program="wrk").parse(read("wrk_server_stopped.txt"), "", LoadSpec(duration_s=2))
    assert m.connection_errors == {"read": 14, "write": 982}
    assert m.status_counts == {"2xx/3xx": 25901}
    assert m.requests_total == 25901 + 14 + 982
    assert m.rps == pytest.approx(25901 / 2.099491)


def test_wrk_output_without_the_report_line_is_an_error():
    text = read("wrk.txt").replace('{"servelab_wrk"', "{")
    with pytest.raises(ValueError):
        WrkDriver(program="wrk").parse(text, "", LoadSpec(duration_s=2))


# ---------------------------------------------------------------- wrk command


def test_wrk_command():
    load = LoadSpec(concurrency=50, duration_s=5, timeout_s=2.5)
    argv = WrkDriver(program="wrk", cpus=4).command(URL, GET, load, None, WORK)
    script = str(script_path(WORK))
    assert argv == [
        "wrk", "-t", "4", "-c", "50", "-d", "5s", "--latency", "--timeout", "3s",
        "-s", script, URL, "--", "GET",
    ]  # fmt: skip


def test_wrk_threads_never_exceed_connections_or_cpus():
    assert WrkDriver(program="wrk", cpus=8).threads(LoadSpec(concurrency=3, duration_s=1)) == 3
    assert WrkDriver(program="wrk", cpus=2).threads(LoadSpec(concurrency=50, duration_s=1)) == 2


def test_wrk_command_post_without_keepalive():
    load = LoadSpec(duration_s=1, keepalive=False)
    argv = WrkDriver(program="wrk", cpus=1).command(URL, POST, load, BODY, WORK)
    headers = [argv[i + 1] for i, word in enumerate(argv) if word == "-H"]
    assert headers == ["X-Trace: on", "Connection: close", "Content-Type: application/json"]
    assert argv[-4:] == [URL, "--", "POST", str(BODY)]


def test_wrk_script_is_shipped_with_the_package():
    path = script_path(WORK)
    assert path.name == SCRIPT_NAME
    assert "function done(summary, latency, requests)" in path.read_text()


def test_wrk_cannot_stop_after_a_request_count():
    reason = WrkDriver(program="wrk").unsupported(GET, LoadSpec(requests=1000))
    assert reason is not None
    assert "duration" in reason


def test_wrk_cannot_do_the_open_model():
    load = LoadSpec(model="open", rate=100, duration_s=1)
    reason = WrkDriver(program="wrk").unsupported(GET, load)
    assert reason is not None
    assert "open model" in reason


def test_wrk_runs_for_the_duration_when_a_count_is_also_given():
    driver = WrkDriver(program="wrk", cpus=1)
    load = LoadSpec(requests=1000, duration_s=3)
    assert driver.unsupported(GET, load) is None
    argv = driver.command(URL, GET, load, None, WORK)
    assert argv[argv.index("-d") + 1] == "3s"
