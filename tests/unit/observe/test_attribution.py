"""The log classifier on real nginx and gunicorn lines, checked against what the load
driver saw in the same runs (tests/fixtures/logs, written by capture.py there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import fake_load, fake_run, markdown_lines

from servelab.observe.attribution import (
    EVENT_BY_KEY,
    LogCursor,
    classify_line,
    classify_lines,
    describe_counts,
    failure_events,
)
from servelab.prepare.building import experiment_from_dict
from servelab.report.failures import cause_lines, failure_rows, ramp_rows
from servelab.report.sections import failure_sections
from servelab.results.records import ListenQueue, RunRecord

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
MANIFEST = json.loads((LOGS / "manifest.json").read_text())


def events(scenario: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for role, source in (("nginx", "nginx"), ("app", "gunicorn")):
        lines = (LOGS / f"{scenario}.{role}.log").read_text().splitlines()
        for key, n in classify_lines(lines, source).counts.items():
            counts[key] = counts.get(key, 0) + n
    return counts


def seen(scenario: str, code: str) -> int:
    return MANIFEST[scenario]["status_counts"].get(code, 0)


def test_every_backlog_502_is_one_eagain_connect_line() -> None:
    counts = events("backlog_unix")
    assert seen("backlog_unix", "502") > 0
    assert counts == {"backlog_overflow": seen("backlog_unix", "502")}


def test_tcp_overload_504s_are_connect_and_read_timeouts() -> None:
    counts = events("timeouts_tcp")
    assert counts.get("connect_timeout", 0) > 0 and counts.get("read_timeout", 0) > 0
    assert counts["connect_timeout"] + counts["read_timeout"] == seen("timeouts_tcp", "504")
    assert failure_events(counts) == seen("timeouts_tcp", "504")


def test_keepalive_race_502s_are_resets_or_early_closes() -> None:
    counts = events("keepalive_race")
    race = counts.get("upstream_reset", 0) + counts.get("upstream_closed", 0)
    assert race > 0 and race == seen("keepalive_race", "502")
    assert set(counts) <= {"upstream_reset", "upstream_closed"}


def test_worker_timeout_lines_and_the_500_it_causes() -> None:
    counts = events("worker_timeout")
    failed = seen("worker_timeout", "500")
    assert failed == 2
    assert counts["worker_timeout"] == failed  # gunicorn's master
    assert counts["aborted_request"] == failed  # the cut request's traceback (handle_abort)
    assert counts["worker_exit"] == counts["worker_boot"] == failed
    assert "app_error" not in counts and failure_events(counts) == failed


def test_worker_recycling_lines() -> None:
    counts = events("worker_recycling")
    assert counts["worker_recycle"] > 0
    assert counts["worker_exit"] == counts["worker_recycle"]
    assert counts["worker_boot"] >= counts["worker_recycle"] - 2  # the last ones may still boot
    failed = seen("worker_recycling", "502")
    assert counts.get("upstream_reset", 0) + counts.get("upstream_closed", 0) == failed
    sync = events("sync_recycling")
    assert sync["worker_recycle"] > 0 and not failure_events(sync)


@pytest.mark.parametrize(
    ("line", "source", "key"),
    [
        ("[2026-11-22 00:31:03 +0000] [29668] [INFO] Starting gunicorn 27.0.1", "gunicorn", None),
        ("Traceback (most recent call last):", "gunicorn", None),
        ("[2026-11-22 00:31:03 +0000] [1] [WARNING] something new", "gunicorn", "other"),
        ("WARNING:  Maximum request limit of 10 exceeded. Terminating process.", "uvicorn",
         "worker_recycle"),
        ("[2026-11-22 00:31:03 +0000] [9] [ERROR] Worker (pid:10) was sent SIGKILL! Perhaps out "
         "of memory?", "gunicorn", "worker_killed"),
        ("[2026-11-22 00:31:03 +0000] [9] [INFO] Worker (pid:10) was sent SIGTERM!", "gunicorn",
         None),
        ("2026/11/22 00:31:04 [error] 1#1: *2 connect() to unix:/x.sock failed (111: Connection "
         "refused) while connecting to upstream, client: 127.0.0.1", "nginx", "upstream_refused"),
        ("2026/11/22 00:31:04 [crit] 1#1: *2 connect() to unix:/x.sock failed (2: No such file "
         "or directory) while connecting to upstream", "nginx", "upstream_refused"),
        ("2026/11/22 00:31:04 [alert] 1#1: 4096 worker_connections are not enough", "nginx",
         "proxy_limit"),
        ("2026/11/22 00:31:04 [warn] 1#1: *9 an upstream response is buffered to a temporary "
         "file", "nginx", "other"),
        ("not a log line at all", "nginx", None),
    ],
)
def test_less_common_lines(line: str, source: str, key: str | None) -> None:
    assert classify_line(line, source) == key


def test_cursor_reads_only_whole_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "nginx.log"
    old = "2026/11/22 00:31:04 [error] 1#1: *1 upstream timed out (110: x) while reading\n"
    log.write_text(old)
    cursor = LogCursor({"nginx": log})
    new = "2026/11/22 00:31:05 [error] 1#1: *2 upstream prematurely closed connection\n"
    with open(log, "a") as handle:
        handle.write(new + new[:20])  # the last line is still being written
    assert cursor.events().counts == {"upstream_closed": 1}
    with open(log, "a") as handle:
        handle.write(new[20:])
    assert cursor.events().counts == {"upstream_closed": 1}
    assert LogCursor({"app": tmp_path / "missing.log"}).events().counts == {}


def test_every_class_explains_itself() -> None:
    for event in EVENT_BY_KEY.values():
        assert event.label and event.cause
    assert describe_counts({"worker_boot": 1, "backlog_overflow": 67}) == (
        "backlog_overflow x67, worker_boot x1"
    )
    assert describe_counts({}) == "-"


def result(variant: str, workload: str, codes: dict[str, int], log: dict[str, int],
           p99: float = 10.0) -> RunRecord:
    return fake_run(
        variant, workload, load=fake_load(rps=1.0, duration_s=1.0, mean_ms=1, p99_ms=p99,
                                          codes=codes),
        log_events=log, log_examples={k: f"line of {k}" for k in log}, somaxconn=128,
        listen_backlog=128, namespace="servelab-1-1",
        listen_queue=ListenQueue(address="unix:/x", backlog=128, max_queued=129,
                                 mean_queued=60, samples=10, full_samples=3),
    )


def test_failure_section_puts_status_counts_beside_log_causes() -> None:
    experiment = experiment_from_dict(
        {"name": "b", "baseline": {"name": "small"}, "variants": [{"name": "large"}],
         "workloads": [{"name": "w"}]}
    )
    runs = [
        result("small", "w", {"200": 133, "502": 67}, {"backlog_overflow": 67}),
        result("large", "w", {"200": 200}, {}),
    ]
    rows = failure_rows(experiment, runs).rows
    assert rows[0][:6] == (
        "w", "small", "200", "67 (33.5%)", "200 x133, 502 x67", "backlog_overflow x67"
    )
    assert rows[0][-1] == "min(2048, 128) = 128, max 129 waiting"
    assert rows[1][3] == "0 (0.0%)"
    (line,) = cause_lines(runs)
    assert line.startswith("backlog_overflow x67: nginx could not connect")
    assert 'e.g. "line of backlog_overflow"' in line
    text = "\n".join(markdown_lines(failure_sections(experiment, runs)))
    assert "## Failures and their causes" in text and "502 x67" in text
    assert ramp_rows(experiment, runs) is None


def test_ramp_table_marks_the_breaking_step() -> None:
    experiment = experiment_from_dict(
        {"name": "r", "baseline": {}, "slo": {"p99_ms": 100},
         "workloads": [{"name": "rate-10"}, {"name": "rate-20"}]}
    )
    runs = [
        result("baseline", "rate-10", {"200": 10}, {}),
        result("baseline", "rate-20", {"200": 15, "502": 5}, {"backlog_overflow": 5}, p99=200),
    ]
    rows = ramp_rows(experiment, runs)
    assert rows is not None
    assert [r[-1] for r in rows.rows] == ["ok", "broken: error ratio 25.0% > 1.0%"]
    text = "\n".join(markdown_lines(failure_sections(experiment, runs)))
    assert "highest sustainable rate 10 req/s" in text and "first 502 at 20 req/s" in text
