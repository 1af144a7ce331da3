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
from servelab.capacity.simulated import SimulatedSender, SimulatedStack
from servelab.capacity.trials import Sender
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
                            "stack_cpu_ms_per_request,sender,send_lag_p99_ms,sent_share,"
                            "peak_in_flight")
    # Each trial's stack CPU (its processes', over the trial) per answered request.
    first = trials[0]
    assert first.cpu_s == {"app 11": 0.5 * first.seconds, "nginx 10": 0.25 * first.seconds}
    cpu_ms = 1000 * 0.75 * first.seconds / first.answered
    # (the stack on CPU 0: its processes kept three quarters of it busy)
    assert first.stack_cpu_share == pytest.approx(0.75)
    assert rows[1].endswith(f",1,{speeds[0]:.0f},0,False,0.7500,{cpu_ms:.4f},kept,,,")
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
    asked, the sender keeping its schedule (``kept``); or, given a ``sender``, as that
    simulated sender would in front of the simulated stack (held up past the stack's
    edge, behind by itself past its own CPU). ``clock``: advanced by each trial's
    schedule and each start (``launch_s``), as the real ones take time."""

    def __init__(self, stacks, mean_rate: float, *, kept: bool = True,
                 sender: SimulatedSender | None = None, clock: FakeClock | None = None,
                 launch_s: float = 3.0):
        super().__init__(stacks)
        self.mean_rate = mean_rate
        self.kept = kept
        self.sender = sender
        self.clock = clock
        self.launch_s = launch_s
        self.warm: list = []

    def launch(self, spec, probe):
        if self.clock is not None:
            self.clock.sleep(self.launch_s)
        return super().launch(spec, probe)

    def send(self, stack, workload, load, scratch):  # a replay's warm-up, not a probe
        self.warm.append(load)
        return fake_load(rps=self.mean_rate, duration_s=load.duration_s)

    def measure(self, stack, workload, load, scratch):
        from servelab.analysis.checks import DRIVER_SATURATED
        from servelab.results.records import ReplayFidelity
        from servelab.traffic.fidelity import MAX_LAG_P99_MS

        rate = load.speed * self.mean_rate
        window = super().measure(stack, workload, load.model_copy(
            update={"model": "open", "rate": rate, "schedule": None,
                    "duration_s": None}), scratch)
        if self.clock is not None:
            self.clock.sleep(window.load.duration_s)
        if self.sender is None:
            fidelity = ReplayFidelity(
                speed=load.speed, scheduled=100, sent=100, lag_p50_ms=0.1,
                lag_p99_ms=1.0 if self.kept else 40.0, lag_max_ms=2.0,
                max_mix_error_points=0.0, ks_distance=0.02,
                problems=() if self.kept else ("the sender fell behind",),
            )
            return replace(window, load=window.load.model_copy(update={"replay": fidelity}))
        p99 = window.load.latency_p99_ms
        lag = self.sender.lag_p99_ms(rate, p99, DRIVER_SATURATED)
        fidelity = ReplayFidelity(
            speed=load.speed, scheduled=load.requests, sent=load.requests,
            lag_p50_ms=lag / 2, lag_p99_ms=lag, lag_max_ms=2 * lag, max_mix_error_points=0.0,
            ks_distance=0.02, peak_in_flight=self.sender.peak_in_flight(rate, p99),
            problems=(f"the sender fell behind: send lag p99 {lag:.1f} ms",)
            if lag > MAX_LAG_P99_MS else (),
        )
        duration = window.load.duration_s
        return replace(window, load=window.load.model_copy(update={
            "replay": fidelity, "driver_cpu_s": self.sender.cpu_share(rate) * duration,
        }))


class FakeClock:
    """Seconds that pass only when slept (or when the fake executor works)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


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
    # (How often the interval holds the truth is test_search's and test_curve's; here one
    # seed, whose estimate is near it.)
    assert answer.estimate.interval is not None and answer.estimate.rate is not None
    low, high = answer.estimate.interval
    assert low <= answer.estimate.rate <= high and abs(answer.estimate.rate / truth - 1) <= 0.1
    assert "x this log's traffic" in printed.getvalue()
    # No faster than 10x: its 20 s then last 2 s, the shortest trial a replay takes.
    assert "speeds 1.00x to 10.00x the log's traffic" in said.getvalue()
    assert "trials as long as the log at each speed" in said.getvalue()
    assert " s trials" not in said.getvalue()  # not the fixed trial length it does not use
    document = json.loads(next(tmp_path.glob("capacity-*/capacity.json")).read_text())
    assert document["variants"][0]["unit"] == "times the log's traffic"


def _measure_replay(tmp_path: Path, executor, plan, clock: FakeClock | None = None):
    said, printed = io.StringIO(), io.StringIO()
    [answer] = measure_capacities(
        *_replayed(tmp_path), plan,
        console=Console(file=said, soft_wrap=True), out=Console(file=printed, soft_wrap=True),
        executor_factory=lambda driver: _context(executor),
        sleep=clock.sleep if clock is not None else [].append,
        **({"clock": clock} if clock is not None else {}),
    )
    return answer, said.getvalue(), printed.getvalue()


def test_a_replay_its_sender_fell_behind_on_with_cpu_and_connections_to_spare_is_no_trial(
    tmp_path: Path,
) -> None:
    """Behind with its connections free and its CPU not full: other processes took the
    sender's CPU, or its timers were late. Not trusted: once more, then below that speed;
    a sender that kept none of the speeds tried stops the search, said in speeds."""
    from servelab.capacity.run import SENDER_ROOM

    executor = ReplayExecutor({"base": SimulatedStack(saturation=450)}, mean_rate=100.0,
                              kept=False)
    plan = CapacityPlan(slo=SLO, max_trials=20, connections=100_000, fresh_starts=False)
    answer, said, printed = _measure_replay(tmp_path, executor, plan)
    assert answer.stopped_because is not None and "fell behind" in answer.stopped_because
    assert all(not t.trusted and t.sender is Sender.STARVED for t in answer.trials)
    assert [t.rate for t in answer.trials] == [1.0, 1.0, SENDER_ROOM, SENDER_ROOM]
    assert f"stopped: at {SENDER_ROOM:.2f}x: " in printed and "req/s:" not in printed
    assert f"searching below {SENDER_ROOM:.2f}x" in said


def test_a_stack_past_its_edge_holds_the_sender_up_a_broken_trial_and_the_search_answers(
    tmp_path: Path,
) -> None:
    """Past the stack's edge the sender's requests wait on it until every connection is
    busy, and it falls behind: the stack's doing. That trial is trusted and broken, its lag
    on the console, and the search goes on to an answer (it used to be 'not trusted', and
    the search stopped there without one)."""
    from servelab.traffic.fidelity import MAX_LAG_P99_MS

    stack = SimulatedStack(saturation=450)
    sender = SimulatedSender(connections=100)
    executor = ReplayExecutor({"base": stack}, mean_rate=100.0, sender=sender)
    plan = CapacityPlan(slo=SLO, max_trials=20, connections=sender.connections,
                        fresh_starts=False)
    answer, said, printed = _measure_replay(tmp_path, executor, plan)
    held_up = [t for t in answer.trials if t.held_up]
    assert held_up, [(t.rate, t.peak_in_flight, t.send_lag_p99_ms) for t in answer.trials]
    for trial in held_up:
        assert trial.trusted and trial.problems == () and not trial.outcome(SLO).held
        assert trial.send_lag_p99_ms is not None and trial.send_lag_p99_ms > MAX_LAG_P99_MS
        assert trial.peak_in_flight == sender.connections
        assert (
            f"  trial {trial.number}: {trial.rate:.2f}x ({trial.asked_rps:,.1f} req/s), p99 "
            f"{trial.latency_ms['p99']:,.1f} ms, 0 errors, send lag p99 "
            f"{trial.send_lag_p99_ms:,.1f} ms, 100 % sent: held up by the stack, "
            f"{sender.connections} of its {sender.connections} connections busy: broke"
        ) in said
    assert all(t.trusted for t in answer.trials)
    assert answer.stopped_because is None and answer.sender_limit is None
    assert answer.estimate.rate is not None and answer.estimate.interval is not None
    assert answer.estimate.lowest_broken is not None
    assert answer.estimate.lowest_broken <= min(t.rate for t in held_up)
    worst = max(t.send_lag_p99_ms or 0.0 for t in held_up)
    assert f"broken {'one' if len(held_up) == 1 else 'ones'} held it up (send lag p99 up to " \
        f"{worst:,.1f} ms" in printed
    kept = [t for t in answer.trials if not t.held_up]
    assert (f"the sender kept the log's schedule in {len(kept)} trials (send lag p99 at most "
            f"{max(t.send_lag_p99_ms or 0.0 for t in kept):,.1f} ms, 100 % sent)") in printed
    document = json.loads(next(tmp_path.glob("capacity-*/trials.jsonl")).read_text()
                          .splitlines()[held_up[0].number - 1])
    assert document["sender"] == "held up by the stack" and document["problems"] == []


def test_a_sender_out_of_cpu_is_not_trusted_and_the_search_goes_on_below_it(
    tmp_path: Path,
) -> None:
    """The sender's own CPU full at a speed: that trial is not trusted, and the search goes
    on below it. A stack that holds every speed the sender can send is answered as such,
    with how to send more; one whose edge is below it gets its interval."""
    from servelab.capacity.run import SENDER_ROOM

    sender = SimulatedSender(cpu_per_request_s=1 / 380)  # its CPU full at 3.8x
    for saturation, edge_below in ((2000, False), (450, True)):
        stack = SimulatedStack(saturation=saturation)
        executor = ReplayExecutor({"base": stack}, mean_rate=100.0, sender=sender)
        plan = CapacityPlan(slo=SLO, max_trials=12, connections=1000, fresh_starts=False)
        (where := tmp_path / str(saturation)).mkdir()
        answer, said, printed = _measure_replay(where, executor, plan)
        [limited] = [t for t in answer.trials if not t.trusted]
        assert limited.sender is Sender.OUT_OF_CPU and "load driver used 100 %" in (
            limited.problems[0]
        )
        assert answer.sender_limit == limited.rate and answer.stopped_because is None
        after = answer.trials[limited.number:]
        assert after and all(t.rate <= SENDER_ROOM * limited.rate for t in after)
        assert f"searching below {SENDER_ROOM * limited.rate:.2f}x" in said
        assert (f"the load driver ran out of CPU at {limited.rate:.2f}x this log's traffic: "
                "searched below it; to search higher, split the load") in printed
        e = answer.estimate
        if edge_below:
            assert e.rate is not None and e.interval is not None and not e.above_max
        else:
            assert e.above_max and e.highest_held == max(t.rate for t in after)
            assert f"holds the SLO at every rate tried, up to {e.highest_held:.2f}x" in printed


def test_a_search_answers_within_its_budget_its_waits_for_the_machine_counted(
    tmp_path: Path,
) -> None:
    """--budget: no trial starts that would end past it, and the starts' waits while the
    machine runs slow are bounded by it and count against it; the answer is what the
    trials by then say, and says the budget ended the search."""
    from servelab.capacity.run import WAIT_SHARE

    clock = FakeClock()
    executor = ReplayExecutor({"base": SimulatedStack(saturation=450)}, mean_rate=100.0,
                              sender=SimulatedSender(), clock=clock)
    readings = iter([100.0] * 3 + [50.0] * 1000)  # slow from the fourth start on
    executor.machine_speed = lambda: next(readings)
    plan = CapacityPlan(slo=SLO, max_trials=40, connections=1000, budget_s=150.0)
    answer, said, printed = _measure_replay(tmp_path, executor, plan, clock)
    assert answer.budget_spent_s is not None and len(answer.trials) < plan.max_trials
    assert answer.seconds == pytest.approx(clock.now) and clock.now <= plan.budget_s
    waited = sum(t.waited_s for t in answer.trials)
    assert 0 < waited <= WAIT_SHARE * plan.budget_s
    assert any(t.started_slow for t in answer.trials)  # measured all the same, and said
    e = answer.estimate
    assert e.rate is not None and e.highest_held is not None and e.lowest_broken is not None
    assert f"its budget spent ({answer.budget_spent_s:.0f} s)" in printed
    assert f"its budget of {plan.budget_s:g} s is spent" in said
    document = json.loads(next(tmp_path.glob("capacity-*/capacity.json")).read_text())
    assert document["variants"][0]["budget_spent_s"] == answer.budget_spent_s
