"""Replay workloads made ready: the schedule built once and written, the load and driver
set, the preflight's request, and the refusals (one line each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.config.experiment import Experiment, StoppingSpec
from servelab.errors import SpecError
from servelab.prepare.replay import with_replay_schedules
from servelab.registry import REPLAY_DRIVER

LINE = '127.0.0.1 - - [06/May/2024:12:00:{s:02d} +0000] "{m} {t} HTTP/1.1" 200 5 "-" "x"\n'


def write_log(path: Path, requests: list[tuple[int, str, str]]) -> Path:
    path.write_text("".join(LINE.format(s=s, m=m, t=t) for s, m, t in requests))
    return path


def experiment(tmp_path: Path, workloads: str) -> Experiment:
    toml = tmp_path / "exp.toml"
    toml.write_text(
        'name = "e"\n[baseline]\nname = "b"\napp = { ref = "sleepy" }\n' + workloads
    )
    return Experiment.from_toml(toml)


LOG = [(0, "GET", "/items/1"), (0, "GET", "/items/2?x=1"), (1, "POST", "/cart"),
       (2, "GET", "/about"), (3, "GET", "/items/3")]


def test_a_replay_workload_gets_its_schedule_load_driver_and_probe(tmp_path: Path) -> None:
    write_log(tmp_path / "access.log", LOG)
    said: list[str] = []
    ready = with_replay_schedules(
        # a path relative to the experiment file's directory
        experiment(tmp_path, '[[workloads]]\nname = "w"\nreplay = { log = "access.log", '
                             'speed = 2 }\n'),
        tmp_path / "results", said.append,
    )
    assert ready.driver == REPLAY_DRIVER
    [workload] = ready.workloads
    load = workload.load
    assert load.model == "replay" and load.speed == 2 and load.requests == 4
    assert load.schedule is not None and Path(load.schedule).is_file()
    assert Path(load.schedule).parent == tmp_path / "results" / "schedules"
    assert workload.request.method == "GET" and workload.request.path in ("/items/1",
                                                                         "/items/2?x=1")
    assert said == [
        "replay w: 4 requests over 4.0 s at speed 2 (mean 2.0 req/s, peak second 2); "
        "whole-second times spread within their second; left out: 1 /cart (no body given)"
    ]
    # built again from the same log and settings: the same file
    again = with_replay_schedules(
        experiment(tmp_path, '[[workloads]]\nname = "w"\nreplay = { log = "access.log", '
                             'speed = 2 }\n'), tmp_path / "results",
    )
    assert again.workloads[0].load.schedule == load.schedule


def test_an_experiment_that_names_locust_keeps_it_and_its_workers(tmp_path: Path) -> None:
    """Locust's workers (here or on other machines) share the log: its options stay."""
    write_log(tmp_path / "access.log", LOG)
    toml = tmp_path / "exp.toml"
    toml.write_text(
        'name = "e"\ndriver = "locust"\ndriver_options = { expect_workers = 4 }\n[baseline]\n'
        'name = "b"\napp = { ref = "sleepy" }\n[[workloads]]\nname = "w"\n'
        'replay = { log = "access.log" }\n'
    )
    named = Experiment.from_toml(toml)
    ready = with_replay_schedules(named, tmp_path / "results")
    assert ready.driver == "locust" and ready.driver_options == {"expect_workers": 4}
    assert ready.workloads[0].load.model == "replay"


def test_a_studys_slices_and_added_rounds_give_way_to_whole_replays(tmp_path: Path) -> None:
    """quick's design (slices in rotation, rounds added until clear) cannot cut a replay:
    three whole replays of each variant in turns instead, and the console says so."""
    write_log(tmp_path / "access.log", LOG)
    sliced = experiment(
        tmp_path, '[[workloads]]\nname = "w"\nreplay = { log = "access.log" }\n'
    ).model_copy(update={"slices": 2, "stopping": StoppingSpec(), "side_by_side": True})
    said: list[str] = []
    ready = with_replay_schedules(sliced, tmp_path / "results", said.append)
    assert (ready.slices, ready.stopping, ready.side_by_side) == (1, None, False)
    assert ready.repetitions == 3
    assert said[-1] == ("replay: each run sends the whole log, so e measures no slices and "
                        "adds no rounds: 3 whole replays of each variant, in turns")


def test_an_experiment_without_replays_is_left_alone(tmp_path: Path) -> None:
    plain = experiment(tmp_path, '[[workloads]]\nname = "w"\nload = { duration_s = 2 }\n')
    assert with_replay_schedules(plain, tmp_path) is plain


@pytest.mark.parametrize(("workloads", "log", "message"), [
    ('[[workloads]]\nname = "w"\nreplay = { log = "access.log" }\n'
     '[[workloads]]\nname = "v"\nload = { duration_s = 2 }\n', LOG, "mixes replayed and other"),
    ('[[workloads]]\nname = "w"\nreplay = { log = "nope.log" }\n', LOG, "does not exist"),
    ('[[workloads]]\nname = "w"\nreplay = { log = "." }\n', LOG, "is a directory"),
    # 5 requests in the schedule's 5 s at speed 1e12: 1e12 req/s, named before anything starts
    ('[[workloads]]\nname = "w"\nreplay = { log = "access.log", speed = 1e12 }\n',
     LOG, r"speed 1e\+12 asks for a mean of 1,000,000,000,000 req/s \(1.0 req/s in the log\)"
     r", far more than servelab's sender can send"),
    ('[[workloads]]\nname = "w"\nreplay = { log = "access.log", routes = ["/none/*"] }\n',
     LOG, "nothing to replay"),
    ('[[workloads]]\nname = "w"\nreplay = { log = "access.log", speed = 0.0001 }\n',
     LOG, "more than a run may"),
    ('[[workloads]]\nname = "w"\nreplay = { log = "access.log", methods = ["POST"] }\n',
     LOG, "1 need a body"),
])
def test_what_cannot_be_replayed_is_one_line(
    tmp_path: Path, workloads: str, log: list[tuple[int, str, str]], message: str
) -> None:
    write_log(tmp_path / "access.log", log)
    with pytest.raises(SpecError, match=message) as raised:
        with_replay_schedules(experiment(tmp_path, workloads), tmp_path / "results")
    assert "\n" not in raised.value.one_line()


def test_a_log_in_another_format_is_refused_naming_its_first_line(tmp_path: Path) -> None:
    (tmp_path / "access.log").write_text("not a log line\n" * 200)
    with pytest.raises(SpecError, match="line 1"):
        with_replay_schedules(
            experiment(tmp_path, '[[workloads]]\nname = "w"\nreplay = { log = "access.log" }\n'),
            tmp_path / "results",
        )
