"""ab without running it: real captured outputs, built command lines, refusals."""

import pytest

from servelab.config.load import LoadSpec, RequestSpec
from servelab.load.ab import AbDriver

from .common import BODY, GET, POST, URL, WORK, read


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
