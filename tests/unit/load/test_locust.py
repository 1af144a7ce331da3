"""Locust without running it: outputs captured from real runs (capture_locust.py), built
command lines, refusals and the errors of bad input."""

import json

import pytest

from servelab.config.load import LoadSpec, RequestSpec, WeightedPath
from servelab.errors import LoadDriverError, SpecError
from servelab.load.locust import LocustDriver
from servelab.load.locust_output import error_kind, failure_key, import_error, split_output
from servelab.traffic.records import LogRecord
from servelab.traffic.schedule import build_schedule

from .common import FIXTURES, GET, POST, URL, WORK, read


def locust(**options) -> LocustDriver:
    return LocustDriver(program="locust", options=options)


def test_closed_run_is_read_from_the_json_statistics():
    m = locust().parse(read("locust_closed.out"), "", LoadSpec(duration_s=2))
    assert m.driver == "locust"
    assert m.requests_total == 10654
    assert m.rps == pytest.approx(10654 / m.duration_s)
    assert 1.9 < m.duration_s < 2.2  # the hooks stop the run after 2 s
    assert (m.latency_p50_ms, m.latency_p99_ms) == (1.0, 3.0)  # Locust's rounded times
    assert m.latency_mean_ms == pytest.approx(1.298, abs=0.001)  # exact, from the totals
    assert m.status_counts == {"2xx/3xx": 10654}
    assert m.connection_errors == {}
    assert m.bytes_received == 2 * 10654  # "ok"
    assert m.driver_details["user classes"] == "FastRequestUser (FastHttpUser)"
    assert [r.name for r in m.by_name] == ["/"]
    assert m.driver_overloaded is False


def test_failures_count_under_their_status_and_request_name():
    m = locust().parse(read("locust_mix.out"), "", LoadSpec(duration_s=2))
    assert m.status_counts == {"2xx/3xx": 5197, "502": 1843}
    assert m.errors == 1843
    rows = {r.name: r for r in m.by_name}
    assert rows["/bad"].failures_by_kind == {"502": 1843}
    assert rows["/post"].failures == 0
    assert rows["/post"].method == "POST"
    assert rows["/bad"].requests + rows["/post"].requests == m.requests_total


def test_a_users_own_file_and_both_http_clients():
    m = locust(locustfile="/work/locustfile.py").parse(
        read("locust_userfile.out"), "", LoadSpec(duration_s=1.5)
    )
    # FastHttpUser: LocustBadStatusCode(code=502); HttpUser: "502 Server Error".
    assert m.status_counts == {"2xx/3xx": 1206, "502": 1131}
    assert m.driver_details["user classes"] == "Fast (FastHttpUser), Requests (HttpUser)"
    assert m.driver_details["scenario"] == "locustfile /work/locustfile.py"
    assert {r.name for r in m.by_name} == {"/", "/bad", "/bad (requests)"}


def test_processes_print_their_own_empty_statistics_too():
    text = read("locust_processes.out")
    assert text.startswith("[]\n[]\n")  # each worker's, before the master's
    m = locust(processes=2).parse(text, "", LoadSpec(duration_s=2))
    assert m.requests_total == 13330
    assert m.driver_processes == 3
    assert m.driver_details["processes"] == "2 workers + master"


def test_open_model_keeps_the_rate():
    m = locust().parse(read("locust_open.out"), "", LoadSpec(model="open", rate=200, duration_s=2))
    assert m.rps == pytest.approx(200, rel=0.05)


def test_latencies_are_the_histogram_of_every_request(tmp_path):
    (tmp_path / "locust.out").write_text(read("locust_mix.out"))
    latencies = locust().latencies_ms(tmp_path)
    assert len(latencies) == 7040
    assert latencies == sorted(latencies)


@pytest.mark.parametrize(
    ("fixture", "kind"), [("locust_refused.out", "connect"), ("locust_timeout.out", "timeout")]
)
def test_a_run_whose_requests_all_fail_is_an_error(fixture, kind):
    with pytest.raises(SpecError, match=r"every one of the .* requests .* failed"):
        locust().parse(read(fixture), "", LoadSpec(duration_s=1))
    _, report = split_output(read(fixture))
    assert {failure_key(e["error"]) for e in report["errors"]} == {("connection", kind)}


def test_a_scenario_that_sends_nothing_is_an_error():
    text = '[]\n{"servelab_locust": {"errors": [], "exceptions": [{"count": 3, "msg": ' \
        '"ZeroDivisionError: division by zero", "traceback": ""}], "total": {}}}\n'
    with pytest.raises(SpecError, match="sent no request; it raised ZeroDivisionError"):
        locust().parse(text, "", LoadSpec(duration_s=1))


def test_cpu_warning_marks_the_driver_overloaded():
    stderr = "WARNING/root: CPU usage above 90%! This may constrain your throughput"
    m = locust().parse(read("locust_closed.out"), stderr, LoadSpec(duration_s=2))
    assert m.driver_overloaded


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("CatchResponseError('status 502, expected 200')", ("status", "502")),
        ("LocustBadStatusCode(code=404)", ("status", "404")),
        ("HTTPError('503 Server Error: Service Unavailable for url: /')", ("status", "503")),
        ("ConnectionRefusedError(111, 'Connection refused')", ("connection", "connect")),
        ("ConnectionResetError(104, 'Connection reset by peer')", ("connection", "reset")),
        ("RemoteDisconnected('Remote end closed connection without response')",
         ("connection", "reset")),
        ("ReadTimeout(...)", ("connection", "timeout")),
        ("something else", ("connection", "other")),
    ],
)  # fmt: skip
def test_failure_messages_by_kind(message, expected):
    assert failure_key(message) == expected
    if expected[0] == "connection":
        assert error_kind(message) == expected[1]


def test_command_closed_model_builtin_scenario():
    argv = locust().command(URL, POST, LoadSpec(concurrency=20, duration_s=2.5), None, WORK)
    assert argv[0] == "locust"
    scenario, hooks = argv[argv.index("-f") + 1].split(",")
    assert scenario.endswith("servelab_request.py") and hooks.endswith("servelab_hooks.py")
    assert argv[argv.index("--host") + 1] == "http://127.0.0.1:8080"  # the path is the request's
    assert argv[argv.index("-u") + 1] == "20"
    assert argv[argv.index("--servelab-run-time") + 1] == "2.5"  # fractions allowed
    assert "--json" in argv and "--headless" in argv
    assert '"method":"POST"' in argv[argv.index("--servelab-request") + 1]
    assert argv[-1] == "FastRequestUser"
    assert "--processes" not in argv and "--servelab-user-rate" not in argv


def test_command_open_model_sends_each_user_on_a_schedule(tmp_path):
    """The built-in scenario keeps a schedule per user (latency from the intended send
    time); a locustfile's users are paced by Locust's constant_throughput."""
    load = LoadSpec(model="open", rate=300, concurrency=30, duration_s=2)
    argv = locust().command(URL, GET, load, None, WORK)
    assert argv[argv.index("--servelab-schedule-rate") + 1] == "10"
    assert "--servelab-user-rate" not in argv and locust().scheduled
    own = locust(locustfile=str(tmp_path / "locustfile.py"))
    argv = own.command(URL, GET, load, None, WORK)
    assert argv[argv.index("--servelab-user-rate") + 1] == "10"
    assert "--servelab-schedule-rate" not in argv and not own.scheduled


def test_what_a_schedule_sent_is_read_by_machine(tmp_path):
    """send_rate, sent and delivered read the hooks' line of the saved output; without a
    schedule, nothing."""
    machines = [{"machine": "load-a", "processes": 2, "requests": 600, "cpu_max": 40.0,
                 "sent": 600, "send_rate": 99.5},
                {"machine": "load-b", "processes": 1, "requests": 300, "cpu_max": 30.0,
                 "sent": 300, "send_rate": 50.1}]
    driver = locust(expect_workers=3)
    (tmp_path / "locust.out").write_text(remote_report(
        worker_machines=machines, sent={"requests": 900, "rate": 149.6}))
    assert driver.send_rate(tmp_path) == 149.6 and driver.sent(tmp_path) == 900
    assert driver.delivered(tmp_path) == {"load-a": 99.5, "load-b": 50.1}
    m = driver.parse(remote_report(worker_machines=machines), "", LoadSpec(duration_s=1))
    assert [x.send_rate for x in m.machines] == [99.5, 50.1]
    (tmp_path / "locust.out").write_text(remote_report())  # no schedule
    assert driver.send_rate(tmp_path) == 0.0 and driver.sent(tmp_path) is None
    assert driver.delivered(tmp_path) == {}
    empty = tmp_path / "none"
    empty.mkdir()
    assert driver.send_rate(empty) == 0.0 and driver.delivered(empty) == {}


def test_command_mix_and_user_class():
    request = RequestSpec(mix=(WeightedPath(path="/a", weight=3), WeightedPath(path="/b")))
    argv = locust(users=("RequestUser",)).command(
        "http://127.0.0.1:8080/a", request, LoadSpec(duration_s=1), None, WORK
    )
    assert '"mix":[["/a",3],["/b",1]]' in argv[argv.index("--servelab-request") + 1]
    assert argv[-1] == "RequestUser"


def test_command_processes_bind_their_master_to_loopback():
    argv = locust(processes=2).command(URL, GET, LoadSpec(duration_s=1), None, WORK)
    assert argv[argv.index("--processes") + 1] == "2"
    assert argv[argv.index("--master-bind-host") + 1] == "127.0.0.1"
    assert argv[argv.index("--master-bind-port") + 1] == argv[argv.index("--master-port") + 1]


def test_command_users_own_file_gets_only_the_host(tmp_path):
    own = tmp_path / "locustfile.py"
    argv = locust(locustfile=str(own)).command(URL, GET, LoadSpec(duration_s=1), None, WORK)
    assert argv[argv.index("-f") + 1].startswith(f"{own},")
    assert "--servelab-request" not in argv
    assert argv[-1] == "--servelab-report"  # no User class named: all of the file's


def test_command_remote_workers():
    driver = locust(expect_workers=3, workers_timeout_s=20, master_bind="10.0.0.5")
    argv = driver.command(URL, GET, LoadSpec(duration_s=5), None, WORK)
    assert argv[argv.index("--expect-workers") + 1] == "3"
    assert argv[argv.index("--expect-workers-max-wait") + 1] == "20"
    assert argv[argv.index("--master-bind-host") + 1] == "10.0.0.5"
    assert argv[argv.index("--master-bind-port") + 1] == "5557"
    assert "--master" in argv
    assert driver.startup_allowance_s() >= 20


def test_refusals():
    assert "duration" in locust().unsupported(GET, LoadSpec(requests=100))
    assert locust().unsupported(GET, LoadSpec(duration_s=1)) is None
    assert "slow" in locust().unsupported(GET, LoadSpec(duration_s=1, slow_ms=10))
    own = locust(locustfile="/x.py")
    assert "keepalive" in own.unsupported(GET, LoadSpec(duration_s=1, keepalive=False))


def test_bad_options_are_one_line():
    with pytest.raises(SpecError, match="invalid Locust option processes"):
        locust(processes=0)
    with pytest.raises(SpecError, match="master_bind"):
        locust(master_bind="not-an-ip")


def test_workers_that_never_connect_are_explained():
    driver = locust(expect_workers=2, workers_timeout_s=5)
    stderr = (
        "Waiting for workers to be ready, 1 of 2 connected\n"
        "ERROR/locust.main: Gave up waiting for workers to connect\n"
    )
    error = driver.explain_failure(1, "", stderr)
    assert isinstance(error, SpecError)
    assert "waited 5 s for 2 worker(s); 1 of 2 connected" in error.problem
    assert "servelab locust-worker --master-host 127.0.0.1" in error.fix
    assert "--resume" in error.fix


def test_workers_gone_mid_experiment_are_named_by_machine():
    driver = locust(expect_workers=3, workers_timeout_s=5)
    driver.machines_seen = {"load-a": 2, "load-b": 1}
    stderr = (
        '{"servelab_waiting": {}}\n{"servelab_waiting": {"load-a": 2}}\n'
        "ERROR/locust.main: Gave up waiting for workers to connect\n"
    )
    error = driver.explain_failure(1, "", stderr)
    assert isinstance(error, SpecError)
    assert error.problem == (
        "Locust's master waited 5 s for 3 worker(s); 2 connected (load-a: 2); missing "
        "since the last run: load-b (1 process)"
    )


def test_no_worker_at_all_says_none_connected():
    error = locust(expect_workers=2, workers_timeout_s=5).explain_failure(
        1, "", '{"servelab_waiting": {}}\nGave up waiting for workers to connect\n'
    )
    assert error.problem == "Locust's master waited 5 s for 2 worker(s); none connected"


def remote_report(**fields) -> str:
    report = {
        "errors": [], "exceptions": [], "user_classes": {"FastRequestUser": "FastHttpUser"},
        "cpu_warning": False, "worker_cpu_warning": False, "workers": 2,
        "total": {"start_time": 1.0, "last_request_timestamp": 2.0},
        "worker_machines": [
            {"machine": "load-a", "processes": 2, "requests": 1234, "cpu_max": 97.0,
             "cpu_warning": True},
        ],
        "workers_lost": [], "finished": True, **fields,
    }
    entry = {"name": "/", "method": "GET", "num_requests": 1234, "num_failures": 0,
             "total_response_time": 1234.0, "max_response_time": 3, "response_times": {"1": 1234},
             "total_content_length": 0, "start_time": 1.0, "last_request_timestamp": 2.0}
    return json.dumps([entry]) + "\n" + json.dumps({"servelab_locust": report}) + "\n"


def test_remote_workers_are_listed_by_machine_with_their_cpu():
    driver = locust(expect_workers=2)
    m = driver.parse(remote_report(), "", LoadSpec(duration_s=1))
    assert m.driver_details["workers"] == "2 on other machines (load-a: 2 processes)"
    (machine,) = m.machines
    assert (machine.machine, machine.processes, machine.requests) == ("load-a", 2, 1234)
    assert (machine.cpu_max_pct, machine.cpu_warning) == (97.0, True)
    assert not any(k.startswith("per run: requests") for k in m.driver_details)
    assert m.driver_details["CPU-bound workers"] == "load-a (97 % of a core)"
    assert m.driver_overloaded
    assert driver.machines_seen == {"load-a": 2}


def test_a_worker_machine_near_a_full_core_is_cpu_bound_without_locusts_warning():
    machines = [{"machine": "a", "processes": 1, "requests": 9, "cpu_max": 91.0},
                {"machine": "b", "processes": 1, "requests": 9, "cpu_max": 40.0}]
    m = locust(expect_workers=2).parse(
        remote_report(worker_machines=machines), "", LoadSpec(duration_s=1)
    )
    assert m.driver_details["CPU-bound workers"] == "a (91 % of a core)"


@pytest.mark.parametrize(
    "fields", [{"workers_lost": ["load-a"]}, {"finished": False}], ids=["one", "all"]
)
def test_a_run_that_lost_workers_is_an_error_not_a_short_run(fields):
    with pytest.raises(LoadDriverError, match="Locust workers left during the run") as info:
        locust(expect_workers=2).parse(remote_report(**fields), "", LoadSpec(duration_s=1))
    assert "--resume" in info.value.fix


def test_import_error_is_the_last_line_with_the_files_line():
    traceback = (
        'Traceback (most recent call last):\n  File "/x/locust/main.py", line 141, in m\n'
        '  File "/tmp/lf.py", line 2, in <module>\n    raise RuntimeError("no token")\n'
        "RuntimeError: no token\n"
    )
    assert import_error(traceback, "/tmp/lf.py") == "RuntimeError: no token (line 2)"


def test_fixtures_are_real_runs():
    assert (FIXTURES / "capture_locust.py").is_file()


def test_a_run_in_which_nothing_was_answered_is_a_zero_not_an_error():
    text = '[]\n{"servelab_locust": {"errors": [], "exceptions": [], "total": {}, ' \
        '"user_classes": {}, "cpu_warning": false, "worker_cpu_warning": false}}\n'
    m = locust().parse(text, "", LoadSpec(duration_s=1))
    assert (m.requests_total, m.rps, m.latency_p99_ms) == (0, 0.0, 0.0)


def test_the_workers_a_run_starts_with_are_said_while_it_runs():
    driver = locust(expect_workers=3)
    assert driver.watches and not locust(processes=2).watches
    waiting = '{"servelab_waiting": {"load-a": 2}}\n'
    assert driver.watch(waiting) is None  # still waiting: nothing said yet
    started = waiting + '{"servelab_started": {"load-a": 2, "load-b": 1}}\n'
    assert driver.watch(started) == (
        "3 on other machines (load-a: 2 processes, load-b: 1 process)"
    )
    # The same words as the run's own record, so the console does not say it twice.
    m = driver.parse(remote_report(workers=2), "", LoadSpec(duration_s=1))
    assert driver.watch('{"servelab_started": {"load-a": 2}}') == m.driver_details["workers"]


def test_no_machines_without_workers_on_other_machines():
    m = locust(processes=2).parse(remote_report(), "", LoadSpec(duration_s=1))
    assert m.machines == ()


def replay_load(tmp_path, **changes) -> LoadSpec:
    t0 = 1_800_000_000.0
    # Stamped to the quarter second: kept as logged (whole seconds are spread).
    records = [LogRecord(t0 + at + 0.25, "GET", f"/items/{at}", 200) for at in range(4)]
    path = tmp_path / "s.tsv"
    build_schedule(records).write(path)
    fields = {"model": "replay", "schedule": str(path), "requests": 4, "concurrency": 2,
              **changes}
    return LoadSpec.model_validate(fields)


def test_command_replay_splits_the_log_over_the_workers_each_with_a_user(tmp_path):
    load = replay_load(tmp_path, speed=2.0)
    argv = locust(expect_workers=3).command(URL, GET, load, None, tmp_path)
    assert argv[-1] == "ReplayUser"  # the built-in scenario's replaying User, alone
    assert argv[argv.index("-u") + 1] == "3"  # a User for each worker process at least
    assert argv[argv.index("--servelab-replay") + 1] == load.schedule
    assert argv[argv.index("--servelab-replay-speed") + 1] == "2.0"
    assert argv[argv.index("--servelab-replay-until") + 1] == "0"
    assert argv[argv.index("--servelab-replay-sent") + 1] == str(tmp_path / "sent.tsv")
    # The log's 3 s (first request to last) at speed 2, and the tail for late requests.
    assert argv[argv.index("--servelab-run-time") + 1] == "2.5"
    assert "--servelab-schedule-rate" not in argv
    warm = locust().command(URL, GET, replay_load(tmp_path, requests=None, duration_s=0.5),
                            None, tmp_path)
    assert warm[warm.index("--servelab-replay-until") + 1] == "0.5"
    assert warm[warm.index("--servelab-run-time") + 1] == "1.5"
    assert warm[warm.index("-u") + 1] == "2"


def test_a_replay_is_the_built_in_scenarios_not_a_locustfiles(tmp_path):
    load = replay_load(tmp_path)
    assert locust().unsupported(GET, load) is None
    assert "ReplayUser" in locust(locustfile="/x.py").unsupported(GET, load)


def test_a_replays_figures_come_from_the_requests_the_master_wrote_down(tmp_path):
    load = replay_load(tmp_path)
    # Locust's clients' errors, sorted by Locust's table: a refused connection.
    (tmp_path / "sent.tsv").write_text(
        "0\t100\t1000\t200\t2\tGET\t/items/0\t\n"
        "1\t1000100\t2000\t200\t2\tGET\t/items/1\t\n"
        "2\t2030000\t3000\t0\t0\tGET\t/items/2\tConnectionRefusedError(111, 'Connection "
        "refused')\n"
        "3\t3000100\t4000\t200\t2\tGET\t/items/3\t\n"
    )
    figures = locust().extra_measurements(tmp_path, load)
    assert figures["requests_total"] == 4
    assert figures["connection_errors"] == {"connect": 1}
    assert figures["replay"].scheduled == 4 and figures["replay"].sent == 4
    # The second went out on time: 2 ms from its intended time.
    assert sorted(locust().latencies_ms(tmp_path)) == pytest.approx([1.1, 2.1, 4.1])
    assert locust().extra_measurements(tmp_path, LoadSpec(duration_s=1)) == {}
