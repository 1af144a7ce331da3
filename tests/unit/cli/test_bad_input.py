"""The bad-input sweep: every case is refused with exit code 2 and one line that names
the problem and the fix, before anything starts, with no traceback. The CLI runs
in-process (support.run_cli), so the whole table takes a few seconds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support import run_cli

APP = "servelab.apps.sleepy_wsgi:app"  # a real app, so that the option under test is refused
LOAD = '[[workloads]]\nname = "w"\nload = { duration_s = 2 }\n'
TOML = "toml:"  # a case whose first argument is an experiment file's text
SPACE = "space:"  # a case whose first argument is a tune space file's text

CASES: list[tuple[list[str], str]] = [
    # study: names and numbers
    (["study", "nope"], "unknown study 'nope'"),
    (["study", "quick", "-r", "0"], "--repetitions must be 1 or more"),
    (["study", "quick", "-c", "0"], "--concurrency must be 1 or more"),
    (["study", "quick", "-n", "0"], "--requests must be 1 or more"),
    (["study", "quick", "-d", "0"], "--duration must be positive"),
    (["study", "quick", "-d", "-3"], "--duration must be positive"),
    (["study", "quick", "-d", "soon"], "Invalid value for '-d' / '--duration'"),
    (["study", "quick", "--warmup", "-1"], "--warmup must be 0 or more"),
    (["study", "quick", "--driver", "siege"], "Invalid value for '--driver'"),
    (["study", "quick", "--no-such-option"], "No such option '--no-such-option'"),
    (["study"], "Missing argument 'NAME'"),
    (["no-such-command"], "No such command 'no-such-command'"),
    (["study", "quick", "--endpoints", "nope"], "unknown endpoint 'nope'"),
    # value lists
    (["study", "workers-threads", "--workers", "0"], "workers must be 1 or more"),
    (["study", "workers-threads", "--workers", "a-b"], "invalid workers list 'a-b'"),
    (["study", "workers-threads", "--workers", "5-1"], "workers range '5-1' runs backwards"),
    (["study", "workers-threads", "--workers", "1-1000000000"], "at most 64 are measured"),
    (["study", "workers-threads", "--threads", ",,"], "invalid threads list ',,'"),
    # CPUs and how to measure
    (["study", "quick", "--stack-cpus", "0"], "only one of --stack-cpus / --driver-cpus"),
    (["study", "quick", "--stack-cpu-quota", "-1"], "--stack-cpu-quota must be positive"),
    (["study", "quick", "--slices", "0"], "Invalid value for '--slices'"),
    (["study", "quick", "--precision", "0"], "--precision must be positive"),
    (["study", "quick", "--precision", "-5"], "--precision must be positive"),
    (["study", "quick", "--min-effect", "-1"], "--min-effect must be positive"),
    (["study", "quick", "--budget", "soon"], "invalid duration 'soon'"),
    (["study", "quick", "--budget", "0s"], "the duration '0s' is zero"),
    (["study", "quick", "--order", "sideways"], "Invalid value for '--order'"),
    (["study", "quick", "--order-seed", "x"], "Invalid value for '--order-seed'"),
    (["study", "port-vs-socket", "--driver", "ab", "--precision", "5"], "keep adding"),
    # a replayed access log
    (["study", "quick", "--window", "0:10"], "--window needs --replay"),
    (["check", "--app", "sleepy", "--log-format", "json"], "--log-format needs --replay"),
    (["study", "quick", "--replay", "/nonexistent/access.log"],
     "the access log /nonexistent/access.log does not exist"),
    (["study", "quick", "--replay", "a.log", "--window", "soon"], "cannot read --window 'soon'"),
    (["study", "quick", "--replay", "a.log", "--window", "9:3"], "ends before it starts"),
    (["study", "quick", "--replay", "a.log", "--route-body", "nope"],
     "cannot read --route-body 'nope'"),
    (["study", "quick", "--replay", "a.log", "--route-body", "/x=/nonexistent.json"],
     "cannot read the body file /nonexistent.json"),
    (["study", "quick", "--replay", "a.log", "--speed", "0"], "replay option speed"),
    (["study", "quick", "--replay", "a.log", "--log-field", "time"], "cannot read --log-field"),
    # the user's app and request
    (["study", "quick", "--app-dir", "/tmp"], "--app-dir needs --app"),
    (["study", "quick", "--path", "/x"], "need --app"),
    (["study", "quick", "--db-latency", "5"], "need --app"),
    (["study", "quick", "--database", "sqlite"], "need --app"),
    (["study", "backlog", "--app", APP], "cannot serve --app"),
    (["study", "quick", "--app", "django", "--resume"], "--resume cannot continue"),
    (["study", "quick", "--app", "not a path"], "neither a built-in app nor a valid import"),
    (["study", "quick", "--app", "nosuchmodule_xyz:app"], "No module named 'nosuchmodule_xyz'"),
    (["study", "quick", "--app", "json:nosuchattr"], "has no attribute 'nosuchattr'"),
    (["study", "quick", "--app", "json:loads"], "looks like an app factory that needs 1"),
    (["study", "quick", "--app", "json:JSONDecoder"], "neither an ASGI app"),
    (["study", "quick", "--app", APP, "--app-dir", "/nonexistent"], "is not a directory"),
    (["study", "quick", "--app", APP, "--path", "noslash"], "must start with '/'"),
    (["study", "quick", "--app", APP, "--header", "NoColon"], "invalid --header 'NoColon'"),
    (["study", "quick", "--app", APP, "--body-file", "/nonexistent"], "cannot read --body-file"),
    (["study", "quick", "--app", APP, "--expect-status", "999"], "expect_status"),
    (["study", "quick", "--app", APP, "--method", "BREW"], "method: Input should be"),
    (["study", "quick", "--app", APP, "--method", "GET\r\nX: y"], "method: Input should be"),
    (["study", "quick", "--app", APP, "--header", "X: a\r\nY: b"], "control character '\\r'"),
    (["study", "quick", "--app", APP, "--header", "X Y: a"], "'X Y' is not an HTTP token"),
    (["study", "quick", "--app", APP, "--header", "X: a\x00"], "control character '\\x00'"),
    (["study", "quick", "--app", APP, "--path", "/a b"], "which a request line cannot carry"),
    (["study", "quick", "--app", APP, "--path", "/a\r\nHost: x"], "has '\\r'"),
    (["tune", "--app", APP, "--header", "X: a\r\nY: b"], "control character '\\r'"),
    (["check", "--app", APP, "--header", "X: a\nY: b"], "control character '\\n'"),
    (["study", "quick", "--app", APP, "--endpoints", "sync-small"], "does not apply with --app"),
    # failure-mode studies
    (["study", "backlog", "--somaxconn", "abc"], "invalid --somaxconn list 'abc'"),
    (["study", "backlog", "--somaxconn", "0"], "somaxconn 0 is out of range"),
    (["study", "backlog", "--somaxconn", "70000"], "somaxconn 70000 is out of range"),
    (["study", "backlog", "--rate", "0"], "--rate must be positive"),
    (["study", "port-vs-socket", "--rate", "100"], "--rate does not apply to study"),
    (["study", "backlog", "--sleep", "-1"], "--sleep must be positive"),
    (["study", "backlog", "--timeout", "0"], "--timeout must be positive"),
    (["study", "backlog", "--netns", "maybe"], "Invalid value for '--netns'"),
    (["study", "apache-vs-nginx", "--db-latency", "-5"], "latency_ms"),
    (["study", "apache-vs-nginx", "--db-jitter", "50", "--db-latency", "10"], "exceeds"),
    # ramp
    (["ramp", "--start", "0"], "start rate must be positive"),
    (["ramp", "--max-rate", "1", "--start", "10"], "is below the start rate"),
    (["ramp", "--factor", "1"], "factor must be above 1"),
    (["ramp", "--p99-ms", "0"], "ramp SLO: p99_ms"),
    (["ramp", "--workers", "0"], "must be 1 or more"),
    (["ramp", "--server", "waitress"], "Invalid value for '--server'"),
    (["ramp", "--somaxconn", "99999"], "somaxconn 99999 is out of range"),
    # bisect
    (["bisect"], "needs --good REV (commits) or --lock-good and --lock-bad (lock files)"),
    (["bisect", "--lock-good", "old.txt"], "--lock-good and --lock-bad go together"),
    (["bisect", "--good", "v1", "--lock-good", "a", "--lock-bad", "b"], "one of the two"),
    (["bisect", "--good", "HEAD~1", "--wheelhouse", "w"], "--wheelhouse is for lock files"),
    (["bisect", "--lock-good", "a", "--lock-bad", "b", "--app", APP, "--python",
      sys.executable], "--python does not go with --lock-good"),
    (["bisect", "--lock-good", "missing.txt", "--lock-bad", "b", "--app", APP],
     "cannot read the lock file missing.txt"),
    (["bisect", "--lock-good", "a", "--lock-bad", "b", "--app", APP, "--wheelhouse",
      "nowhere"], "--wheelhouse nowhere is not a directory"),
    (["bisect", "--good", "HEAD~1"], "servelab bisect needs your app in a git repository"),
    (["bisect", "--good", "HEAD~1", "--app", APP, "--retries", "-1"], "--retries 0 or more"),
    (["bisect", "--good", "HEAD~1", "--app", APP, "-d", "1"], "--duration must be at least 2"),
    (["bisect", "--good", "HEAD~1", "--app", APP], "servelab bisect needs the app in a git"),
    # capacity
    (["capacity", "--slo", "p99<abc"], "cannot read 'p99<abc' in the SLO"),
    (["capacity", "--slo", "p98<100ms"], "the SLO names 'p98', which is no latency statistic"),
    (["capacity", "--slo", "p99<100"], "has no time unit"),
    (["capacity", "--slo", "errors<1%"], "bounds no latency"),
    (["capacity", "--slo", "p99<100ms,errors<150%"], "is not below 100 %"),
    (["capacity", "--slo", ""], "the SLO is empty"),
    (["capacity", "--start", "0"], "--start must be a positive rate"),
    (["capacity", "--start", "-5"], "--start must be a positive rate"),
    (["capacity", "--start", "100", "--max-rate", "50"], "the rate range is empty"),
    (["capacity", "--trial-seconds", "0"], "--trial-seconds must be in"),
    (["capacity", "--machine-wait", "-1"], "--machine-wait must be in [0, 600] seconds"),
    (["capacity", "--max-trials", "2"], "--max-trials must be 3 to 200"),
    (["capacity", "--half-width", "0"], "--half-width must be between 0 and 50 %"),
    (["capacity", "--workers", "0"], "--workers must be 1 or more"),
    (["capacity", "--budget", "30s"], "--budget 30s is too short for a capacity search"),
    (["capacity", "--driver", "wrk"], "--driver wrk cannot send at a fixed rate"),
    (["capacity", "--driver", "locust", "--locustfile", "django"],
     "cannot send on a schedule and keep each request's intended send time with built-in"),
    # experiment files
    (["run", "/nonexistent.toml"], "does not exist"),
    (["run", "/tmp"], "/tmp is a directory"),
    ([TOML + "not = [valid"], "is not valid TOML"),
    ([TOML + "\udcff"], "is not UTF-8 text"),
    ([TOML + "[baseline]\nserver = { wokers = 2 }\n" + LOAD], "server.wokers: unknown key"),
    ([TOML + "[baseline]\nserver = { workers = 0 }\n" + LOAD], "greater than or equal to 1"),
    ([TOML + '[baseline]\nserver = { kind = "waitress" }\n' + LOAD], "baseline.server.kind"),
    ([TOML + '[baseline]\nserver = { kind = "uvicorn", threads = 4 }\n' + LOAD], "no threads"),
    ([TOML + '[baseline]\nserver = { kind = "mod_wsgi" }\n' + LOAD], "runs the app inside"),
    ([TOML + '[baseline]\nproxy = { kind = "none", transport = "unix" }\n' + LOAD], "a proxy"),
    ([TOML + '[baseline]\nproxy = { mpm = "event" }\n' + LOAD], "mpm: Apache knob"),
    ([TOML + '[baseline]\nproxy = { protocol = "uwsgi" }\n' + LOAD], "spoken by 'uwsgi' only"),
    ([TOML + "[baseline]\n"], "workloads: Field required"),
    ([TOML + '[baseline]\n[[workloads]]\nname = "w"\nload = { }\n'], "so the run is bounded"),
    ([TOML + '[baseline]\n[[workloads]]\nname = "w"\nload = { model = "open", duration_s = 5 }\n'],
     "the open model needs 'rate'"),
    ([TOML + '[baseline]\n[[workloads]]\nname = "w"\nload = { concurrency = -1, duration_s = 1 }'],
     "concurrency: Input should be greater than or equal to 1"),
    ([TOML + "[baseline]\n[[variants]]\nserver = { workers = 3 }\n" + LOAD], "has no name"),
    ([TOML + '[baseline]\n[grid]\n"server.workers" = []\n' + LOAD], "needs a non-empty list"),
    ([TOML + 'driver = "wrk"\n[baseline]\n[[workloads]]\nname = "w"\nload = { requests = 9 }\n'],
     "load driver wrk cannot do this (workload 'w')"),
    ([TOML + '[baseline]\n[database]\nkind = "sqlite"\nlatency_ms = 5\n' + LOAD],
     "latency_ms and jitter_ms need kind = 'postgresql'"),
    ([TOML + 'driver = "ab"\nslices = 2\n[baseline]\n' + LOAD],
     "slices need the oha or locust driver"),
    # stored results
    (["results", "list", "--results", "/nonexistent"], "no servelab results database"),
    (["results", "show", "abc", "--results", "/nonexistent"], "no result 'abc'"),
    (["results", "compare", "1", "2", "--results", "/nonexistent"], "no servelab results"),
    (["report", "nope"], "no result 'nope'"),
    (["export", "nope"], "no result 'nope'"),
    # check: thresholds, baselines
    (["check", "--fail-if", "throughput < -5%"], "unknown metric 'throughput'"),
    (["check", "--fail-if", "rps <= 5"], "invalid threshold 'rps <= 5'"),
    (["check", "--fail-if", "rps < -5"], "give a percentage (rps < -5%)"),
    (["check", "--inconclusive", "maybe"], "Invalid value for '--inconclusive'"),
    (["check", "--app", APP], "needs the baseline version of your app"),
    (["check", "--app", APP, "--baseline-dir", "/nonexistent"], "is not a directory"),
    (["check", "--app", APP, "--baseline-ref", "main", "--app-dir", "/"], "not in one"),
    (["check", "--workers", "0"], "--workers and --concurrency must be at least 1"),
    (["check", "-d", "1"], "--duration must be at least 2 s, got 1"),
    (["check", "--database", "sqlite"], "does not take --database"),
    # tune: objective, space, options
    (["tune", "--objective", "min-p99"], "pass --rate"),
    (["tune", "--rate", "100"], "leave out --rate"),
    (["tune", "--objective", "fastest"], "Invalid value for '--objective'"),
    (["tune", "--max-error-ratio", "2"], "--max-error-ratio must be from 0 to below 1"),
    (["tune", "--p99-ms", "-5"], "--p99-ms must be positive"),
    (["tune", "--servers", "waitress"], "unknown app server 'waitress'"),
    (["tune", "--worker-class", "eventlet"], "unknown gunicorn worker class 'eventlet'"),
    (["tune", "--transport", "udp"], "unknown transport 'udp'"),
    (["tune", "--upstream-keepalive", "-1"], "--upstream-keepalive must be 0 or more"),
    (["tune", "--workers", "0"], "workers must be 1 or more"),
    (["tune", "-d", "0"], "--duration must be positive"),
    (["tune", "--precision", "5"], "--precision does not apply to servelab tune"),
    (["tune", "--endpoint", "nope"], "unknown endpoint 'nope'"),
    (["tune", "--path", "/x"], "need --app"),
    (["tune", "--space", "/nonexistent.toml"], "space file /nonexistent.toml does not exist"),
    ([SPACE + "x = 1\n"], "has no [tune] table"),
    ([SPACE + "[tune]\ncolour = 1\n"], "unknown key tune.colour"),
    ([SPACE + "[tune]\nspace = 3\n"], "must be a non-empty array of tables"),
    ([SPACE + "[tune]\nbudget = 'soon'\n"], "invalid duration 'soon'"),
    ([SPACE + "[[tune.space]]\ngrid = { 'server.workers' = [1] }\n", "--workers", "2"],
     "the space ([[tune.space]]) and so do the knob options"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=lambda v: None)
def test_bad_input_is_refused_in_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    if args[0].startswith(TOML):
        path = tmp_path / "experiment.toml"
        path.write_bytes(args[0][len(TOML) :].encode("utf-8", "surrogateescape"))
        args = ["run", str(path)]
    if args[0].startswith(SPACE):
        path = tmp_path / "space.toml"
        path.write_text(args[0][len(SPACE) :])
        args = ["tune", "--space", str(path), *args[1:]]
    measuring = args[0] in ("study", "run", "ramp", "capacity", "bisect", "tune")
    results = ["--results", str(tmp_path / "results")] if measuring else []
    done = run_cli(*args, *results, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()  # one line
    assert line.startswith("servelab: error: ") and "(fix: " in line, line
    assert message in line, line
    assert not (tmp_path / "results" / "servelab.db").exists()  # nothing stored


def test_the_sweep_is_wide() -> None:
    assert len(CASES) >= 60


LOCUSTFILES = {
    "import": ("import no_such_module_here\n", "ModuleNotFoundError: No module named "
               "'no_such_module_here' (line 1)"),
    "raises": ('raise RuntimeError("API_TOKEN is not set")\n',
               "RuntimeError: API_TOKEN is not set (line 1)"),
    "no-user": ("x = 1\n", "defines no User class"),
}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--locustfile", "LF:import"], LOCUSTFILES["import"][1]),
        (["--locustfile", "LF:raises"], LOCUSTFILES["raises"][1]),
        (["--locustfile", "LF:no-user"], LOCUSTFILES["no-user"][1]),
        (["--locustfile", "/nonexistent/locustfile.py"], "does not exist"),
        (["--locust-user", "Nobody"], "has no User class 'Nobody'"),
        (["--locust-processes", "0"], "processes: Input should be greater than or equal to 1"),
        (["-n", "100"], "Locust runs for a duration"),
        (["--expect-workers", "2", "--listen", "0.0.0.0"], "every network of this machine"),
        (["--expect-workers", "2", "--listen", "192.0.2.1"], "not an address of this machine"),
        (
                ["--expect-workers", "1", "--side-by-side"],
                "workers on other machines serve one Locust master",
            ),
    ],
    ids=lambda v: None,
)
def test_locust_bad_input_is_refused_in_one_line(args, message, tmp_path: Path) -> None:
    if not (Path(sys.executable).parent / "locust").is_file():  # never import it: gevent
        pytest.skip("locust is not installed beside this Python")
    for i, arg in enumerate(args):
        if arg.startswith("LF:"):
            path = tmp_path / "locustfile.py"
            path.write_text(LOCUSTFILES[arg[3:]][0])
            args = [*args[:i], str(path), *args[i + 1 :]]
    done = run_cli(
        "study", "quick", "--driver", "locust", *args, "--results", str(tmp_path / "results"),
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("servelab: error: ") and "(fix: " in line, line
    assert message in line, line
    assert not (tmp_path / "results" / "servelab.db").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--processes", "0"], "--processes must be 1 or more"),
        (["--master-port", "70000"], "--master-port 70000 is not a port"),
        (["--locustfile", "/nonexistent/locustfile.py"], "does not exist"),
        (["--locustfile", "LF:raises"], LOCUSTFILES["raises"][1]),
    ],
    ids=lambda v: None,
)
def test_locust_worker_bad_input_is_refused_before_any_worker(args, message, tmp_path: Path):
    if not (Path(sys.executable).parent / "locust").is_file():
        pytest.skip("locust is not installed beside this Python")
    args = [str(tmp_path / "lf.py") if a == "LF:raises" else a for a in args]
    (tmp_path / "lf.py").write_text(LOCUSTFILES["raises"][0])
    done = run_cli("locust-worker", "--master-host", "127.0.0.1", *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("servelab: error: ") and "(fix: " in line, line
    assert message in line, line


def test_driver_options_need_a_driver_that_takes_them(tmp_path: Path) -> None:
    done = run_cli(
        "study", "quick", "--locustfile", "x.py", "--results", str(tmp_path), cwd=tmp_path
    )
    assert done.returncode == 2
    assert "load driver oha takes no options of its own (--locustfile)" in done.stderr


@pytest.mark.parametrize("command", [["study", "quick"], ["run", "FILE"], ["tune"],
                                     ["check", "--baseline-dir", "BASE"]])
def test_a_header_with_a_line_break_is_refused_before_any_process_starts(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26: `--header $'X: a\\r\\nY: b'` gave tracebacks from the readiness thread
    after the start-up wait; now HTTP's rules are checked before anything starts."""
    import subprocess

    def no_process(*args, **kwargs):
        raise AssertionError(f"a process started before the header was checked: {args[0]}")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    (tmp_path / "exp.toml").write_text("[baseline]\n" + LOAD)
    (tmp_path / "base").mkdir()
    args = [{"FILE": str(tmp_path / "exp.toml"), "BASE": str(tmp_path / "base")}.get(a, a)
            for a in command]
    done = run_cli(*args, "--app", APP, "--header", "X: a\r\nY: b",
                   "--results", str(tmp_path / "results"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        "servelab: error: invalid --header 'X: a\\r\\nY: b': header 'X' has the control "
        "character '\\r' in its value (a header is one line) (fix: give one header per "
        "--header, 'Name: value' on one line)"
    )


def test_a_tune_budget_that_fits_no_race_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    done = run_cli("tune", "--budget", "5s", "--results", str(tmp_path / "results"),
                   cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]  # after the line naming the space
    assert last.startswith("servelab: error: a budget of 5 s cannot race any candidates")
    assert "(fix: give --budget" in last and "races all" in last
    assert not (tmp_path / "results" / "servelab.db").exists()  # nothing stored
