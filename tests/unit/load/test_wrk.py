"""wrk without running it: real captured outputs, built command lines, refusals."""

import pytest

from servelab.config.load import LoadSpec
from servelab.load.wrk import SCRIPT_NAME, WrkDriver, script_path

from .common import BODY, GET, POST, URL, WORK, read


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
