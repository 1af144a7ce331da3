"""The replay driver without running it: its command line, and its figures read from a
sender's per-request record (latency from the intended time, statuses, routes, fidelity)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.config.load import LoadSpec, RequestSpec
from servelab.errors import MissingToolError
from servelab.load import vegeta
from servelab.load.vegeta import SENT_FILE, VegetaDriver
from servelab.traffic.records import LogRecord
from servelab.traffic.schedule import build_schedule


def schedule_file(tmp_path: Path) -> Path:
    t0 = 1_800_000_000.0
    records = [LogRecord(t0 + at, "GET", target, 200) for at, target in (
        (0.0, "/items/1"), (0.5, "/items/2"), (1.0, "/users/7"), (1.5, "/items/3"),
    )]
    path = tmp_path / "s.tsv"
    build_schedule(records).write(path)
    return path


def load_of(path: Path, **changes: object) -> LoadSpec:
    fields: dict[str, object] = {"requests": 4, **changes}
    return LoadSpec.model_validate(
        {"model": "replay", "schedule": str(path), "concurrency": 50, **fields}
    )


def test_the_command_paces_the_schedule_against_the_stack(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(VegetaDriver, "executable", lambda self: "/bin/sender")
    path = schedule_file(tmp_path)
    argv = VegetaDriver().command(
        "http://127.0.0.1:8080/ignored?x=1", RequestSpec(headers={"X-A": "b"}),
        load_of(path, speed=2.0), None, tmp_path,
    )
    assert argv[0] == "/bin/sender"
    assert argv[argv.index("-base") + 1] == "http://127.0.0.1:8080"
    assert argv[argv.index("-speed") + 1] == "2.0"
    assert argv[argv.index("-connections") + 1] == "50"
    assert argv[argv.index("-bodies") + 1] == str(path.with_suffix(".bodies.json"))
    assert argv[argv.index("-header") + 1] == "X-A: b"
    assert "-until" not in argv
    warm = VegetaDriver().command("http://h:1/", RequestSpec(),
                                  load_of(path, requests=None, duration_s=2.0), None, tmp_path)
    assert warm[warm.index("-until") + 1] == "2s"


def test_a_missing_sender_says_how_to_build_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(vegeta, "sender_path", lambda: tmp_path / "nothing")
    with pytest.raises(MissingToolError, match="replay sender"):
        VegetaDriver().executable()


def test_only_replay_loads_are_its_own() -> None:
    assert VegetaDriver().unsupported(RequestSpec(), LoadSpec(requests=10)) is not None


def test_figures_count_latency_from_each_intended_time(tmp_path: Path) -> None:
    path = schedule_file(tmp_path)
    # seq, sent us, latency us, code, bytes, method, target, error: the second request
    # went out 20 ms late, the third got a 502, the fourth no answer.
    (tmp_path / SENT_FILE).write_text(
        "0\t100\t1000\t200\t12\tGET\t/items/1\t\n"
        "1\t520000\t2000\t200\t12\tGET\t/items/2\t\n"
        "2\t1000100\t5000\t502\t0\tGET\t/users/7\t502 Bad Gateway\n"
        "3\t1500200\t10000000\t0\t0\tGET\t/items/3\tGet: context deadline exceeded\n"
    )
    driver = VegetaDriver()
    load = load_of(path)
    base = driver.parse('{"sent": 4, "seconds": 1.6}\n', "", load)
    figures = driver.extra_measurements(tmp_path, load)
    measured = base.model_copy(update=figures)
    assert measured.requests_total == 4
    assert measured.status_counts == {"200": 2, "502": 1}
    assert measured.connection_errors == {"timeout": 1}
    assert measured.errors == 2
    # 1.1 ms, 22 ms (20 late + 2), 5.1 ms: latency from the intended time
    assert measured.latency_max_ms == pytest.approx(22.0)
    assert sorted(driver.latencies_ms(tmp_path)) == pytest.approx([1.1, 5.1, 22.0])
    by_route = {n.name: n for n in measured.by_name}
    assert by_route["/items/{id}"].requests == 3
    assert by_route["/items/{id}"].failures == 1
    assert by_route["/users/{id}"].failures_by_kind == {"502": 1}
    replay = measured.replay
    assert replay is not None and replay.sent == 4 and replay.scheduled == 4
    assert replay.lag_max_ms == pytest.approx(20.0)
    assert replay.kept is False  # 20 ms late at p99 of four
    assert driver.sent(tmp_path) == 4
