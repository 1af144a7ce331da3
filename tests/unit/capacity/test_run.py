"""A capacity search measured through a fake executor (no servers): the probe, the trials
at the rates the search asks, every trial written as it ends, the answer files, a driver
that cannot keep up stopped and reported rather than taken as a capacity."""

from __future__ import annotations

import io
import json
import math
import random
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console
from support import FakeExecutor, fake_load

from servelab.capacity import CapacityPlan, capacity_experiment, parse_slo
from servelab.capacity.files import TRIALS_FILE, read_trials
from servelab.capacity.run import measure_capacities
from servelab.capacity.simulated import SimulatedStack
from servelab.config.run import RunOptions
from servelab.host.cpus import CpuPlan
from servelab.measuring.executor import Window
from servelab.prepare.building import experiment_from_dict
from servelab.report.base import NO_MATPLOTLIB
from servelab.results.records import ProcessUsage

SLO = parse_slo("p99<100ms,errors<0.1%")


class QueueExecutor(FakeExecutor):
    """Every stack a simulated queue (``stacks``: variant -> SimulatedStack); the driver
    sends at ``send_share`` of the rate asked and uses ``driver_share`` of its CPU."""

    def __init__(self, stacks, *, send_share: float = 1.0, driver_share: float = 0.2):
        super().__init__()
        self.stacks = stacks
        self.rng = random.Random(7)
        self.rates: list[float] = []
        self.driver = SimpleNamespace(
            name="oha", keep_latencies=False, send_rate=lambda workdir: self.sent_at,
            unsupported=lambda request, load: None,
        )
        self.send_share = send_share
        self.driver_share = driver_share
        self.sent_at = 0.0
        self.loads: list = []

    def machine_speed(self):  # a different speed before each start
        self.log.append(("speed",))
        return 1000.0 + sum(1 for e in self.log if e[0] == "speed")

    def send(self, stack, workload, load, scratch):  # the throughput probe
        self.log.append(("probe", stack.variant))
        return fake_load(rps=self.stacks[stack.variant].saturation * 0.9, duration_s=2.0)

    def measure(self, stack, workload, load, scratch):
        simulated = self.stacks[stack.variant]
        self.rates.append(load.rate)
        outcome = simulated.trial(load.rate, 100.0, self.rng)
        p99 = 100.0 / outcome.margin
        requests = load.requests or round(load.rate * load.duration_s)
        failed = requests // 10 if outcome.errors_broke else 0
        self.sent_at = load.rate * self.send_share
        self.loads.append(load)
        duration = requests / load.rate
        self.log.append(("measure", stack.variant, load.rate))
        return Window(
            started="2026-11-26T00:00:00+0000",
            load=fake_load(
                rps=(requests - failed) / duration, duration_s=duration,
                requests=requests - failed, mean_ms=p99 / 2, p99_ms=p99,
                driver_cpu_s=self.driver_share * duration,
            ),
            usage=(ProcessUsage(role="app", pid=11, name="gunicorn", cpu_s=0.5 * duration,
                                peak_rss_bytes=0),
                   ProcessUsage(role="nginx", pid=10, name="nginx", cpu_s=0.25 * duration,
                                peak_rss_bytes=0)),
            observed={}, neighbour_share=None,
            latencies_ms=tuple([p99 / 2] * 50 + [p99] * 50),
        )


def _running(tmp_path: Path, stacks: dict[str, SimulatedStack]):
    stack_dicts = [
        {"name": name, "app": {"ref": "sleepy"}, "server": {"kind": "gunicorn"}}
        for name in stacks
    ]
    experiment = experiment_from_dict(
        capacity_experiment("cap", stack_dicts, {"path": "/"}), source="test"
    )
    exports = tuple((fmt, tmp_path / f"export.{fmt}") for fmt in ("json", "markdown", "csv"))
    return experiment, CpuPlan("0", "1"), RunOptions(results_dir=tmp_path, result_files=exports)


def _measure(tmp_path, stacks, executor, plan, slept=None):
    said, printed = io.StringIO(), io.StringIO()
    answers = measure_capacities(
        *_running(tmp_path, stacks), plan,
        console=Console(file=said, width=300), out=Console(file=printed, width=300),
        executor_factory=lambda driver: _context(executor),
        sleep=(slept if slept is not None else []).append,
    )
    return answers, said.getvalue(), printed.getvalue()


def _context(value):
    import contextlib

    return contextlib.nullcontext(value)


def test_one_start_each_with_one_start(tmp_path: Path) -> None:
    """--one-start: each variant's stack started once, every trial on it."""
    stacks = {"base": SimulatedStack(saturation=1000), "fast": SimulatedStack(saturation=1500)}
    executor = QueueExecutor(stacks)
    plan = CapacityPlan(slo=SLO, max_trials=25, connections=100_000, fresh_starts=False)
    answers, _, _ = _measure(tmp_path, stacks, executor, plan)
    assert [e for e in executor.log if e[0] in ("launch", "stop", "probe")] == [
        ("launch", "base"), ("probe", "base"), ("launch", "fast"), ("probe", "fast"),
        ("stop", "fast"), ("stop", "base"),
    ]
    assert all(t.start == 1 for a in answers for t in a.trials)


def test_variants_searched_in_turns_each_trial_on_a_fresh_start_every_trial_written(
    tmp_path: Path,
) -> None:
    stacks = {"base": SimulatedStack(saturation=1000), "fast": SimulatedStack(saturation=1500)}
    executor = QueueExecutor(stacks)
    plan = CapacityPlan(slo=SLO, max_trials=25, connections=100_000)
    answers, said, printed = _measure(tmp_path, stacks, executor, plan)
    assert [a.variant for a in answers] == ["base", "fast"]
    # Each trial after the first: the stack stopped, started again and warmed up (a
    # probe-like load) before it; one start of each variant runs at a time.
    lifecycle = [e for e in executor.log if e[0] in ("launch", "stop", "probe", "measure")]
    assert lifecycle[:6] == [
        ("launch", "base"), ("probe", "base"), ("launch", "fast"), ("probe", "fast"),
        ("measure", "base", lifecycle[4][2]), ("measure", "fast", lifecycle[5][2]),
    ]
    assert lifecycle[6:9] == [("stop", "base"), ("launch", "base"), ("probe", "base")]
    for answer in answers:
        assert [t.start for t in answer.trials] == list(range(1, len(answer.trials) + 1))
        name = answer.variant
        assert executor.log.count(("launch", name)) == executor.log.count(("stop", name))
        assert executor.log.count(("launch", name)) == len(answer.trials)
    # The machine's speed probed before every start, none running (the probe would be
    # slowed): each trial carries its start's.
    launches = [i for i, e in enumerate(executor.log) if e[0] == "launch"]
    assert all(executor.log[i - 1] == ("speed",) for i in launches)
    speeds = [t.cpu_speed for a in answers for t in a.trials]
    assert len(set(speeds)) == len(speeds) == len(launches)
    measured = [e[1] for e in executor.log if e[0] == "measure"]
    shorter = min(len(a.trials) for a in answers)
    assert measured[: 2 * shorter] == ["base", "fast"] * shorter  # in turns
    for answer, stack in zip(answers, stacks.values(), strict=True):
        truth = stack.capacity(100.0)
        # (How often the interval holds the truth is test_search's; here one seed.)
        assert answer.estimate.interval is not None and answer.estimate.rate is not None
        low, high = answer.estimate.interval
        assert abs(answer.estimate.rate / truth - 1) <= 0.05
        assert (high - low) / 2 <= 0.05 * answer.estimate.rate
        # From half the probed throughput (0.9 x saturation), 1.5x steps: no far overshoot.
        assert answer.trials[0].rate == round(0.45 * stack.saturation, 1)
        assert max(t.rate for t in answer.trials) <= 2 * 0.9 * stack.saturation
    [directory] = [p for p in tmp_path.iterdir() if p.name.startswith("capacity-cap-")]
    trials = read_trials(directory)
    assert len(trials) == sum(len(a.trials) for a in answers)
    assert [t.variant for t in trials[:2]] == ["base", "fast"]  # as they were measured
    assert sorted(trials, key=lambda t: (t.variant, t.number)) == [
        t for a in answers for t in a.trials
    ]
    answer_file = json.loads((directory / "capacity.json").read_text())
    assert answer_file["slo"] == "p99 < 100 ms, errors < 0.1 %"
    assert [v["variant"] for v in answer_file["variants"]] == ["base", "fast"]
    assert math.isclose(answer_file["variants"][0]["capacity_rps"], answers[0].estimate.rate)
    assert "| base |" in (directory / "capacity.md").read_text()
    assert printed.count("holds") == 2 and "[" in printed
    # 1.5x the saturation: a clear gain, said with its interval.
    assert "fast: +" in printed and "capacity vs base (more;" in printed
    assert answer_file["comparisons"][0]["verdict"] == "more"
    assert "Against base" in (directory / "capacity.md").read_text()
    svg = (directory / "capacity.svg").read_text()
    assert svg.count("<path") > 10 and "p99 limit 100 ms" in svg
    assert (directory / "capacity.png").read_bytes().startswith(b"\x89PNG")
    page = (directory / "capacity.html").read_text()
    assert "<svg" in page and "Against base" in page and "<script" not in page
    # --export-json / -markdown / -csv: the answer, its summary, every trial.
    assert json.loads((tmp_path / "export.json").read_text()) == answer_file
    assert (tmp_path / "export.markdown").read_text().startswith("# Capacity at p99 < 100 ms")
    rows = (tmp_path / "export.csv").read_text().splitlines()
    assert rows[0].startswith("variant,trial,rate,send_rate") and len(rows) == len(trials) + 1
    assert rows[0].endswith(",start,cpu_speed,waited_s,started_slow,stack_cpu_share,"
                            "stack_cpu_ms_per_request")
    # Each trial's stack CPU (its processes', over the trial) per answered request.
    first = trials[0]
    assert first.cpu_s == {"app 11": 0.5 * first.seconds, "nginx 10": 0.25 * first.seconds}
    cpu_ms = 1000 * 0.75 * first.seconds / first.answered
    # (the stack on CPU 0: its processes kept three quarters of it busy)
    assert first.stack_cpu_share == pytest.approx(0.75)
    assert rows[1].endswith(f",1,{speeds[0]:.0f},0,False,0.7500,{cpu_ms:.4f}")
    assert "  base: near its capacity the stack's CPUs were 75 % busy" in printed
    assert "trial 1:" in said


def test_a_driver_that_cannot_keep_up_is_reported_not_taken_as_a_capacity(
    tmp_path: Path,
) -> None:
    stacks = {"base": SimulatedStack(saturation=1000)}
    executor = QueueExecutor(stacks, send_share=0.9)  # 10 % short of every rate
    plan = CapacityPlan(slo=SLO, connections=100_000)
    slept: list[float] = []
    [answer], _, printed = _measure(tmp_path, stacks, executor, plan, slept)
    # The first trial held with the driver short: once more at the same rate (the stack
    # drained first), then stop.
    assert executor.rates == [450.0, 450.0]
    assert len(slept) == 2 and min(slept) >= 1.0  # between the two, and after them
    assert answer.stopped_because is not None and "asked" in answer.stopped_because
    assert answer.estimate.rate is None and answer.estimate.interval is None
    assert "stopped: at 450.0 req/s" in printed
    lines = (next(tmp_path.glob("capacity-*")) / TRIALS_FILE).read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["problems"] for line in lines)


def test_a_cpu_bound_driver_is_reported_too(tmp_path: Path) -> None:
    stacks = {"base": SimulatedStack(saturation=1000)}
    executor = QueueExecutor(stacks, driver_share=0.97)
    [answer], _, _ = _measure(tmp_path, stacks, executor, CapacityPlan(slo=SLO))
    assert "load driver used 97 %" in (answer.stopped_because or "")


def test_without_matplotlib_the_answer_files_say_so_and_keep_the_figures(
    tmp_path: Path, without_matplotlib: None
) -> None:
    stacks = {"base": SimulatedStack(saturation=1000)}
    [answer], _, printed = _measure(tmp_path, stacks, QueueExecutor(stacks),
                                    CapacityPlan(slo=SLO, connections=100_000))
    assert answer.estimate.rate is not None and "holds" in printed
    [directory] = [p for p in tmp_path.iterdir() if p.name.startswith("capacity-cap-")]
    assert not (directory / "capacity.svg").exists()
    assert NO_MATPLOTLIB in (directory / "capacity.md").read_text()
    page = (directory / "capacity.html").read_text()
    assert "<svg" not in page and "| base |" in page


def test_a_driver_that_counts_no_requests_runs_timed_trials_and_says_who_sent(
    tmp_path: Path,
) -> None:
    """Locust runs for a duration: its trials are the trial's length at the rate, what it
    sent is its own count, and each machine's send rate is kept with the trial (in
    trials.jsonl and capacity.md)."""
    stacks = {"base": SimulatedStack(saturation=1000)}
    executor = QueueExecutor(stacks)
    executor.driver = SimpleNamespace(
        name="locust", keep_latencies=False, send_rate=lambda workdir: executor.sent_at,
        unsupported=lambda request, load: "no request count" if load.requests else None,
        sent=lambda workdir: 1234,
        delivered=lambda workdir: {"load-a": executor.sent_at / 2, "load-b": 0.5},
    )
    plan = CapacityPlan(slo=SLO, connections=100_000, trial_s=4.0, max_trials=4)
    [answer], _, _ = _measure(tmp_path, stacks, executor, plan)
    assert executor.loads and all(
        load.requests is None and load.duration_s == 4.0 and load.model == "open"
        for load in executor.loads
    )
    first = answer.trials[0]
    assert first.sent == 1234 and first.seconds == pytest.approx(1234 / first.rate)
    assert first.delivered == {"load-a": first.rate / 2, "load-b": 0.5}
    [directory] = [p for p in tmp_path.iterdir() if p.name.startswith("capacity-cap-")]
    assert read_trials(directory)[0].delivered == first.delivered
    assert f"load-a {first.rate / 2:,.1f}" in (directory / "capacity.md").read_text()


def test_a_start_waits_while_the_machine_runs_slow_and_its_trial_says_so(
    tmp_path: Path,
) -> None:
    """Before each start the machine's speed is probed; in a dip (below 85 % of the usual
    speed) the start waits and probes again, and the trial keeps the wait."""
    from servelab.capacity.machine import PROBE_EVERY_S

    stacks = {"base": SimulatedStack(saturation=1000)}
    executor = QueueExecutor(stacks)
    readings = iter([100.0, 101.0, 99.0, 40.0, 42.0, 100.0] + [100.0] * 50)
    executor.machine_speed = lambda: next(readings)
    plan = CapacityPlan(slo=SLO, max_trials=6, connections=100_000)
    slept: list[float] = []
    answers, said, printed = _measure(tmp_path, stacks, executor, plan, slept)
    trials = answers[0].trials
    assert [t.waited_s for t in trials[:5]] == [0.0, 0.0, 0.0, 2 * PROBE_EVERY_S, 0.0]
    assert [t.cpu_speed for t in trials[:5]] == [100.0, 101.0, 99.0, 100.0, 100.0]
    assert slept.count(PROBE_EVERY_S) == 2 and not any(t.started_slow for t in trials)
    assert "its start waited 10 s for the machine's own speed to come back" in said
    assert "its starts waited 10 s for the machine's own speed" in printed
    [directory] = [p for p in tmp_path.iterdir() if p.name.startswith("capacity-cap-")]
    assert "| 100 (waited 10 s) |" in (directory / "capacity.md").read_text()



class ReplayExecutor(QueueExecutor):
    """A replayed log's trials: the speed asked is the log's mean rate times it, sent as
    asked, the sender keeping its schedule (``kept``)."""

    def __init__(self, stacks, mean_rate: float, *, kept: bool = True):
        super().__init__(stacks)
        self.mean_rate = mean_rate
        self.kept = kept
        self.warm: list = []

    def send(self, stack, workload, load, scratch):  # a replay's warm-up, not a probe
        self.warm.append(load)
        return fake_load(rps=self.mean_rate, duration_s=load.duration_s)

    def measure(self, stack, workload, load, scratch):
        from servelab.results.records import ReplayFidelity

        rate = load.speed * self.mean_rate
        window = super().measure(stack, workload, load.model_copy(
            update={"model": "open", "rate": rate, "schedule": None,
                    "duration_s": None}), scratch)
        fidelity = ReplayFidelity(
            speed=load.speed, scheduled=100, sent=100, lag_p50_ms=0.1,
            lag_p99_ms=1.0 if self.kept else 40.0, lag_max_ms=2.0, max_mix_error_points=0.0,
            ks_distance=0.02, problems=() if self.kept else ("the sender fell behind",),
        )
        return replace(window, load=window.load.model_copy(update={"replay": fidelity}))


def _replayed(tmp_path: Path):
    from servelab.traffic.records import LogRecord
    from servelab.traffic.schedule import build_schedule

    schedule = build_schedule([LogRecord(1.8e9 + i / 100, "GET", f"/items/{i % 7}")
                               for i in range(2000)])  # 100 req/s for 20 s
    path = tmp_path / "schedule.tsv"
    schedule.write(path)
    experiment, cpus, options = _running(tmp_path, {"base": SimulatedStack(saturation=450)})
    [workload] = experiment.workloads
    load = workload.load.model_copy(update={
        "model": "replay", "schedule": str(path), "rate": None, "requests": 2000,
    })
    experiment = experiment.model_copy(
        update={"workloads": (workload.model_copy(update={"load": load}),)}
    )
    return experiment, cpus, options


def test_a_replayed_logs_headroom_is_searched_over_its_speed(tmp_path: Path) -> None:
    """--replay: the speed is searched from 1x (the log's own traffic), doubling; each
    trial sends the log at that speed; the answer is in times the log's traffic."""
    # It holds p99 < 100 ms in 9 trials of 10 up to SimulatedStack.quantile(0.9): 2.25x.
    executor = ReplayExecutor({"base": SimulatedStack(saturation=450)}, mean_rate=100.0)
    plan = CapacityPlan(slo=SLO, max_trials=20, connections=100_000, fresh_starts=False)
    said, printed = io.StringIO(), io.StringIO()
    [answer] = measure_capacities(
        *_replayed(tmp_path), plan,
        console=Console(file=said, width=300), out=Console(file=printed, width=300),
        executor_factory=lambda driver: _context(executor), sleep=[].append,
    )
    speeds = [t.rate for t in answer.trials]
    assert speeds[:3] == [1.0, 2.0, 4.0]  # bracketing up from the log's own traffic
    assert all(t.asked_rps == pytest.approx(100.0 * t.rate, rel=0.01) for t in answer.trials)
    assert all(load.model == "replay" for load in executor.warm)
    assert answer.traffic is not None and answer.traffic.mean_rate == pytest.approx(100.0, rel=0.01)
    truth = SimulatedStack(saturation=450).quantile(0.9, 100.0) / answer.traffic.mean_rate
    assert answer.estimate.interval is not None
    assert answer.estimate.interval[0] <= truth <= answer.estimate.interval[1]
    assert "x this log's traffic" in printed.getvalue()
    # No faster than 10x: its 20 s then last 2 s, the shortest trial a replay takes.
    assert "speeds 1.00x to 10.00x the log's traffic" in said.getvalue()
    assert "trials as long as the log at each speed" in said.getvalue()
    assert " s trials" not in said.getvalue()  # not the fixed trial length it does not use
    document = json.loads(next(tmp_path.glob("capacity-*/capacity.json")).read_text())
    assert document["variants"][0]["unit"] == "times the log's traffic"


def test_a_replay_the_sender_did_not_keep_is_no_trial(tmp_path: Path) -> None:
    executor = ReplayExecutor({"base": SimulatedStack(saturation=450)}, mean_rate=100.0,
                              kept=False)
    plan = CapacityPlan(slo=SLO, max_trials=20, connections=100_000, fresh_starts=False)
    [answer] = measure_capacities(
        *_replayed(tmp_path), plan, console=Console(file=io.StringIO()),
        out=Console(file=io.StringIO()),
        executor_factory=lambda driver: _context(executor), sleep=[].append,
    )
    assert answer.stopped_because is not None and "fell behind" in answer.stopped_because
    assert all(not t.trusted for t in answer.trials)
