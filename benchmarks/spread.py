"""Issue #34, item 1: where does the spread of an in-turns study come from?

    flock /tmp/servelab-cpu.lock .venv/bin/python benchmarks/spread.py collect \\
        [--rounds 4] [--endpoints sync-small,sync-big] [--passes 6] [--out spread.jsonl]
    .venv/bin/python benchmarks/spread.py split spread.jsonl

``collect`` measures identical stacks (A/A: three starts of quick's baseline, nginx-tcp
in front of gunicorn + UvicornWorker x2) the way ``study quick`` does on a small
machine: each round starts the three afresh (speed probe before each, as the runner
does), and per endpoint each is warmed up for 0.5 s, then driven alone for 1 s windows
by oha (concurrency 50, stack on the stack CPU, oha on the driver CPU, favoured
cgroups as every study). Two schedules follow each other in a round:

- ``alt``: ``--passes`` passes over the three starts (A B C, rotated), as quick's
  passes (each window the first after a switch);
- ``block``: each start driven three windows in a row (A A A B B B C C C), so the
  first window after a switch can be told from the next ones.

Every window is one JSON line, written as it is measured (nothing is lost to Ctrl-C):
its requests/s, the stack's CPU seconds per process (the app's workers apart), the
driver's CPU seconds, the steal the machine's CPUs saw, a 0.1 s speed probe on the
stack CPU just before it, and from oha's per-request database the connection ramp
(when the first answer came, requests/s in the first 0.25 s against the rest).

``timescale`` asks at which time scale a window's residual lives: one start of the
same stack, warmed up, driven without a break for ``--seconds`` by oha (per-request
database), its answers counted in 50 ms bins; for windows of 0.1 … 4 s it prints the
spread of log requests/s between windows and between *adjacent* windows. Adjacent
windows that differ less than unrelated ones (ratio below 1) mean the slowdowns last
longer than a window, and alternating two stacks that fast would cancel part of them;
a ratio near 1 means the noise is white at that scale, and no alternation beats the
floor. No switching cost is counted (one continuous run): a real alternation pays a
connection ramp per window on top.

    flock /tmp/servelab-cpu.lock .venv/bin/python benchmarks/spread.py timescale \
        [--endpoint sync-small] [--seconds 30] [--repeat 3]

``alternate`` tries that faster design: two identical stacks, warm, each driven by an
oha of its own that is kept running for ``--seconds`` and stopped (SIGSTOP) while the
other drives, switched every 0.25 / 0.5 / 1 s (``--windows``): no connection ramp, no
restart. A window is counted from ``settle`` after its driver resumed (the answers that
waited while it was stopped, and the other stack still finishing its own) to just before
the next stop. Then, on the same two warm stacks, today's in-turns design (oha anew for
each 1 s window). Both are scored alike: each B window against the A windows on both of
its sides (A B A: linear drift cancels), the 95 % half-width from the means of
``--block`` s blocks of such pairs (adjacent pairs share drift), scaled to one minute.

    flock /tmp/servelab-cpu.lock .venv/bin/python benchmarks/spread.py alternate \
        [--endpoint sync-small] [--seconds 30] [--repeat 3] [--windows 0.5,0.25] [--block 3]

``split`` reads the lines and prints the spread of log requests/s by level (rounds,
starts, passes, windows), the first window after a switch against the next ones, the
ramp's share of a 1 s window, how evenly the workers shared the work, and how much of
the window-to-window spread the speed probe, steal and the driver's CPU per request
explain (their correlation with the window's residual). Then what that means for the
half-width an identical pair reaches per minute of measuring in each design. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import multiprocessing
import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

from servelab.config.load import Workload
from servelab.host.cpus import default_cpu_plan, parse_cpu_list
from servelab.load.oha import REQUESTS_DB, OhaDriver
from servelab.measuring import host_executor
from servelab.measuring.executor import Window
from servelab.measuring.host import HostExecutor
from servelab.observe.neighbours import cpu_speed
from servelab.studies import StudyOptions
from servelab.studies.seeds import quick

WINDOW_S = 1.0
WARMUP_S = 0.5
RAMP_S = 0.25
STACKS = ("a", "b", "c")
WORKERS = 2  # quick's gunicorn workers


# -- the speed gauge (--gauge) ------------------------------------------------------
# A child process spinning a fixed unit of interpreter work on the driver's CPU at the
# kernel's idle priority (SCHED_IDLE: it runs only when nothing else there wants the
# CPU), counting units in shared memory; units per second of *its own* CPU time
# (/proc/PID/schedstat) between two readings is the machine's speed over that stretch,
# read at a window's edges. Measured on servelab's 2-CPU VM it explained 0-2 % of a
# window's residual (the slowdowns are the stack's vCPU's own, not the machine's), so it
# stayed here, as the evidence, and did not become a covariate of the analysis.
# One unit of work: the same allocation-free loop as ``cpu_speed``'s.
UNIT = 2_000
# Below this much of its own CPU time in a window, the gauge's reading says nothing.
MIN_GAUGE_CPU_S = 0.05


@dataclass(frozen=True)
class GaugeReading:
    """The gauge's count of units and its own CPU time, at one moment."""

    units: int
    cpu_ns: int

    def speed_since(self, earlier: GaugeReading) -> float | None:
        """Units per CPU second between ``earlier`` and this reading; None when the gauge
        ran too little in between (its CPU was wanted by others the whole time)."""
        cpu_s = (self.cpu_ns - earlier.cpu_ns) / 1e9
        if cpu_s < MIN_GAUGE_CPU_S:
            return None
        return (self.units - earlier.units) / cpu_s


def _spin(counter: Any, cpus: frozenset[int]) -> None:  # pragma: no cover - child process
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, cpus)
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    while True:
        for _ in range(UNIT):
            pass
        counter.value += 1


class SpeedGauge:
    """``with SpeedGauge("1") as gauge: a = gauge.read(); ...; gauge.read().speed_since(a)``.

    Not pinned (``cpus`` None) or without /proc's schedstat, every reading is None."""

    def __init__(self, cpus: str | None) -> None:
        self.cpus = parse_cpu_list(cpus) if cpus else None
        self._process: multiprocessing.process.BaseProcess | None = None
        self._counter: Synchronized[int] | None = None

    def __enter__(self) -> SpeedGauge:
        if self.cpus is None:
            return self
        context = multiprocessing.get_context("fork")
        counter = context.Value("Q", 0, lock=False)
        process = context.Process(
            target=_spin, args=(counter, self.cpus), name="servelab-speed-gauge", daemon=True
        )
        process.start()
        self._process, self._counter = process, counter  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.join(timeout=5)

    def read(self) -> GaugeReading | None:
        if self._process is None or self._counter is None or self._process.pid is None:
            return None
        try:
            fields = Path(f"/proc/{self._process.pid}/schedstat").read_text().split()
        except OSError:
            return None
        return GaugeReading(int(self._counter.value), int(fields[0]))


def steal_s() -> float:
    """Seconds of steal over all CPUs so far (/proc/stat's cpu line)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[8]) / 100.0  # USER_HZ is 100 on Linux


def ramp(db: Path) -> dict[str, float]:
    """From oha's per-request database: when the first answer came, and requests/s in
    the first RAMP_S against the rest of the window."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute('SELECT start, "end" FROM oha').fetchall()
    if not rows:
        return {}
    origin = min(start for start, _ in rows)
    ends = sorted(end - origin for _, end in rows)
    last = ends[-1]
    early = sum(1 for e in ends if e <= RAMP_S)
    rest = len(ends) - early
    return {
        "first_answer_s": ends[0],
        "rps_ramp": early / RAMP_S,
        "rps_rest": rest / (last - RAMP_S) if last > RAMP_S else 0.0,
        "span_s": last,
    }


def record(window: Window, scratch: Path, **keys: Any) -> dict[str, Any]:
    usage = window.usage
    # The app's busiest processes are its workers (its master barely runs).
    workers = sorted((p.cpu_s for p in usage if p.role == "app"), reverse=True)[:WORKERS]
    line = {
        **keys,
        "requests": window.load.requests_total,
        "duration_s": window.load.duration_s,
        "rps": window.load.rps,
        "stack_cpu_s": sum(p.cpu_s for p in usage),
        "worker_cpu_s": workers,
        "driver_cpu_s": window.load.driver_cpu_s,
        "errors": sum(window.load.connection_errors.values())
        + sum(n for code, n in window.load.status_counts.items() if code[0] not in "23"),
    }
    with contextlib.suppress(sqlite3.Error, FileNotFoundError):
        line.update(ramp(scratch / "measure" / REQUESTS_DB))
    return line


def measured(
    executor: HostExecutor, stack: Any, workload: Workload, scratch: Path, gauge: SpeedGauge,
    **keys: Any,
) -> dict[str, Any]:
    speed = cpu_speed(executor.cpu_plan.stack, seconds=0.1, rounds=1)
    stolen = steal_s()
    began = time.monotonic()
    load = workload.load.model_copy(update={"duration_s": WINDOW_S, "requests": None})
    before = gauge.read()
    window = executor.measure(stack, workload, load, scratch)
    after = gauge.read()
    return record(
        window, scratch, **keys, speed=speed, steal_s=steal_s() - stolen,
        wall_s=time.monotonic() - began, at=began,
        gauge=after.speed_since(before) if before and after else None,
    )


def collect(args: argparse.Namespace) -> None:
    experiment = quick(StudyOptions(endpoints=tuple(args.endpoints.split(",")),
                                    side_by_side=False))
    baseline = experiment.baseline
    stacks = [baseline.model_copy(update={"name": name}) for name in STACKS]
    driver = OhaDriver()
    driver.keep_latencies = True  # oha writes its per-request database (the ramp)
    cpu_plan = default_cpu_plan()
    out = Path(args.out)
    print(f"A/A: {len(stacks)} starts of {baseline.name} a round, {args.rounds} rounds; "
          f"{cpu_plan.describe()}; windows to {out}", file=sys.stderr)
    with (
        out.open("a") as sink,
        host_executor(driver, cpu_plan, experiment) as executor,
        SpeedGauge(cpu_plan.driver if args.gauge else None) as gauge,
    ):

        def keep(line: dict[str, Any]) -> None:
            sink.write(json.dumps(line) + "\n")
            sink.flush()

        for round_ in range(1, args.rounds + 1):
            with contextlib.ExitStack() as alive, executor.scratch() as scratch:
                alive.callback(executor.stopped)
                live = []
                for name, spec in zip(STACKS, stacks, strict=True):
                    speed = executor.machine_speed()
                    running = alive.enter_context(
                        executor.launch(spec, experiment.workloads[0].request)
                    )
                    live.append((name, running, speed))
                for workload in experiment.workloads:
                    warm = workload.load.model_copy(
                        update={"duration_s": WARMUP_S, "requests": None}
                    )
                    for _, running, _ in live:
                        executor.send(running, workload, warm, scratch)
                    common = {"round": round_, "endpoint": workload.name}
                    for pass_index in range(args.passes):
                        shift = pass_index % len(live)
                        for position, (name, running, start_speed) in enumerate(
                            [*live[shift:], *live[:shift]]
                        ):
                            keep(measured(
                                executor, running, workload, scratch, gauge, **common, start=name,
                                phase="alt", pass_index=pass_index, position=position,
                                in_row=1, start_speed=start_speed,
                            ))
                    lead = workload.load.model_copy(
                        update={"duration_s": args.lead, "requests": None}
                    )
                    for pass_index in range(args.passes if args.lead else 0):
                        shift = pass_index % len(live)
                        for position, (name, running, start_speed) in enumerate(
                            [*live[shift:], *live[:shift]]
                        ):
                            executor.send(running, workload, lead, scratch)
                            keep(measured(
                                executor, running, workload, scratch, gauge, **common, start=name,
                                phase="lead", pass_index=pass_index, position=position,
                                in_row=1, start_speed=start_speed,
                            ))
                    for name, running, start_speed in live:
                        for in_row in (1, 2, 3):
                            keep(measured(
                                executor, running, workload, scratch, gauge, **common, start=name,
                                phase="block", pass_index=None, position=None,
                                in_row=in_row, start_speed=start_speed,
                            ))
                    print(f"round {round_} {workload.name}: done", file=sys.stderr)


# -- the split ----------------------------------------------------------------------


def load_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ci_mean(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t interval."""
    from scipy import stats as sps

    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return mean, math.nan
    half = float(sps.t.ppf(0.975, n - 1)) * statistics.stdev(values) / math.sqrt(n)
    return mean, half


def correlation(xs: Sequence[float], ys: Sequence[float]) -> float:
    if len(xs) < 3 or statistics.pstdev(xs) == 0 or statistics.pstdev(ys) == 0:
        return math.nan
    return statistics.correlation(xs, ys)


def pct(log_sd: float) -> str:
    return f"{100 * math.expm1(log_sd):5.1f} %"


def levels(windows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Print the spread of ``windows`` (passes over the starts) by level; set each window's
    residual (start and pass removed); the windows by round."""
    # Levels, from the passes (quick's schedule): y = round + start + pass + window.
    rounds = sorted({w["round"] for w in windows})
    by_round = {r: [w for w in windows if w["round"] == r] for r in rounds}
    round_means = [statistics.fmean(w["y"] for w in ws) for ws in by_round.values()]
    start_devs, pass_devs, resid = [], [], []
    for ws in by_round.values():
        rmean = statistics.fmean(w["y"] for w in ws)
        starts = {s: [w for w in ws if w["start"] == s] for s in STACKS}
        smean = {s: statistics.fmean(w["y"] for w in v) for s, v in starts.items() if v}
        passes = {p: [w for w in ws if w["pass_index"] == p] for p in {w["pass_index"] for w in ws}}
        pmean = {p: statistics.fmean(w["y"] - smean[w["start"]] for w in v)
                 for p, v in passes.items()}
        start_devs += [m - rmean for m in smean.values()]
        pass_devs += list(pmean.values())
        for w in ws:
            w["resid"] = w["y"] - smean[w["start"]] - pmean[w["pass_index"]]
            resid.append(w["resid"])
    n_pass = statistics.fmean(len([w for w in windows if w["round"] == r and w["start"] == "a"])
                              for r in rounds)
    window_var = statistics.fmean(r * r for r in resid) * (3 * n_pass) / max(
        1.0, (3 * n_pass) - 3 - n_pass + 1)
    var_pass_means = statistics.fmean(d * d for d in pass_devs)
    pass_var = max(0.0, var_pass_means - window_var / 3)
    start_var_raw = statistics.variance(start_devs) if len(start_devs) > 1 else math.nan
    start_var = max(0.0, start_var_raw - (window_var + pass_var) / n_pass)
    round_var = statistics.variance(round_means) if len(round_means) > 1 else math.nan
    print("spread of log requests/s by level (as a CV):")
    print(f"  between rounds (the round's mean)          {pct(math.sqrt(round_var))}")
    print(f"  between starts of one round (true start)   {pct(math.sqrt(start_var))}"
          f"   (raw start means: {pct(math.sqrt(start_var_raw))})")
    print(f"  between passes (the moment, shared)         {pct(math.sqrt(pass_var))}")
    print(f"  window within its start and pass            {pct(math.sqrt(window_var))}")
    raw_window = statistics.stdev(w["y"] - statistics.fmean(
        v["y"] for v in windows if v["round"] == w["round"] and v["start"] == w["start"])
        for w in windows)
    print(f"  window around its start's mean (no pass)     {pct(raw_window)}")
    return by_round


def split_workload(lines: list[dict[str, Any]], workload: str) -> None:
    own = [w for w in lines if w["endpoint"] == workload and w["rps"] > 0]
    alt = [w for w in own if w["phase"] == "alt"]
    print(f"\n== {workload}: {len(own)} windows ({len(alt)} in passes), "
          f"{len({w['round'] for w in own})} rounds, mean "
          f"{statistics.fmean(w['rps'] for w in own):,.0f} requests/s")
    for w in own:
        w["y"] = math.log(w["rps"])

    by_round: dict[int, list[dict[str, Any]]] = {}
    for phase in ("alt", "lead"):
        windows = [w for w in own if w["phase"] == phase]
        if windows:
            print(f"[{phase}: " + ("each visit a 1 s window]" if phase == "alt" else
                                  "each visit a discarded lead-in, then a 1 s window]"))
            found = levels(windows)
            by_round = found if phase == "alt" else by_round

    # First window after a switch against the next ones in a row.
    blocks = [w for w in own if w["phase"] == "block"]
    diffs: dict[int, list[float]] = {2: [], 3: []}
    for w in blocks:
        if w["in_row"] == 1:
            for later in blocks:
                if (later["round"], later["start"]) == (w["round"], w["start"]) \
                        and later["in_row"] in diffs:
                    diffs[later["in_row"]].append(w["y"] - later["y"])
    for k, ds in diffs.items():
        if ds:
            mean, half = ci_mean(ds)
            print(f"first window after a switch vs window {k} in a row: "
                  f"{100 * math.expm1(mean):+.1f} % (95 % CI ±{100 * half:.1f})")
    # Adjacent windows of the same start (block, 2 vs 3) against adjacent windows of two
    # identical starts (alt, consecutive positions): what pairing in time buys.
    same = [a["y"] - b["y"] for a in blocks for b in blocks
            if (a["round"], a["start"]) == (b["round"], b["start"])
            and (a["in_row"], b["in_row"]) == (2, 3)]
    if len(same) > 1:
        print(f"two adjacent windows of one start (2nd vs 3rd in a row): sd of the log "
              f"ratio {pct(statistics.stdev(same))}")

    # The ramp.
    ramped = [w for w in own if "rps_rest" in w and w["rps_rest"] > 0]
    if ramped:
        first = statistics.median(w["first_answer_s"] * 1000 for w in ramped)
        lost = statistics.fmean(1 - w["rps_ramp"] / w["rps_rest"] for w in ramped)
        share = statistics.fmean(w["rps"] / w["rps_rest"] for w in ramped)
        print(f"connection ramp: first answer after {first:.1f} ms (median); the first "
              f"{RAMP_S:g} s served {100 * lost:.1f} % less than the rest; the window's "
              f"requests/s is {100 * share:.1f} % of its steady rate")
        ys = [w["y"] for w in ramped]
        print(f"  correlation of log requests/s with the ramp's loss: "
              f"{correlation([1 - w['rps_ramp'] / w['rps_rest'] for w in ramped], ys):+.2f}")

    # Workers: how unevenly the two app workers shared the window's work.
    spread = [w for w in alt if len(w["worker_cpu_s"]) > 1 and sum(w["worker_cpu_s"]) > 0]
    uneven = [(w["worker_cpu_s"][0] - w["worker_cpu_s"][-1]) / sum(w["worker_cpu_s"])
              for w in spread]
    if uneven:
        print(f"workers: the busier worker did {100 * statistics.median(uneven):.0f} % more "
              f"of the app's CPU than the other (median; max {100 * max(uneven):.0f} %); "
              f"correlation with the residual "
              f"{correlation(uneven, [w['resid'] for w in spread]):+.2f}")

    # Covariates against the window's residual (start and pass removed).
    def covariate(name: str, value: Any) -> None:
        pairs = [(value(w), w["resid"]) for w in alt]
        pairs = [(x, y) for x, y in pairs if x is not None and not math.isnan(x)]
        if len(pairs) < 3:
            return
        r = correlation([x for x, _ in pairs], [y for _, y in pairs])
        print(f"  {name:44s} r = {r:+.2f}  (variance explained {100 * r * r:4.1f} %)")

    print("what explains a window's residual (start and pass removed):")
    covariate("speed probe before the window (log)",
              lambda w: math.log(w["speed"]) if w.get("speed") else None)
    covariate("steal seconds in the window", lambda w: w.get("steal_s"))
    covariate("speed gauge during the window (log)",
              lambda w: math.log(w["gauge"]) if w.get("gauge") else None)
    covariate("driver CPU per request (log)",
              lambda w: math.log(w["driver_cpu_s"] / w["requests"])
              if w["driver_cpu_s"] and w["requests"] else None)
    covariate("stack CPU seconds in the window",
              lambda w: w["stack_cpu_s"])
    covariate("requests per stack CPU second (log)",
              lambda w: math.log(w["rps"] * w["duration_s"] / w["stack_cpu_s"])
              if w["stack_cpu_s"] else None)
    speeds = [w["start_speed"] for w in own if w.get("start_speed")]
    if speeds:
        print(f"speed probe at the starts: {min(speeds):,.0f} … {max(speeds):,.0f} "
              f"(CV {100 * statistics.stdev(speeds) / statistics.fmean(speeds):.1f} %)")

    # Half-width per minute: identical pairs in each design, from these windows.
    wall = statistics.fmean(w["wall_s"] for w in alt)
    print(f"a 1 s window takes {wall:.2f} s of wall time (probe, driver start, sampling)")
    floor(alt, wall)
    adjacent = []
    for ws in by_round.values():
        ordered = sorted(ws, key=lambda w: w["at"])
        adjacent += [b["y"] - a["y"] for a, b in itertools.pairwise(ordered)
                     if a["start"] != b["start"]]
    if len(adjacent) > 2:
        sd_pair = statistics.stdev(adjacent)
        print(f"two identical starts, adjacent windows: sd of the log ratio {pct(sd_pair)} "
              f"(n = {len(adjacent)})")


def floor(windows: list[dict[str, Any]], wall_s: float) -> None:
    """The best half-width any design reaches on identical stacks, from the windows' own
    residual (start and pass removed: what no pairing in time cancels) and their wall
    time: two stacks alternating windows for a minute, and quick's shape (three stacks,
    this endpoint's quarter of a 160 s budget). No start effect, no warm-up, no launch, a
    normal quantile: a design pays at least this."""
    resid = [w["resid"] for w in windows]
    starts = len({(w["round"], w["start"]) for w in windows})
    passes = len({(w["round"], w["pass_index"]) for w in windows})
    df = max(1, len(resid) - starts - passes + 1)
    sigma = math.sqrt(sum(r * r for r in resid) / df)

    def half_width(seconds: float, stacks: int) -> float:
        per_stack = seconds / (stacks * wall_s)
        return 100 * math.expm1(1.96 * sigma * math.sqrt(2 / per_stack))

    print(f"floor (window residual {pct(sigma)}, {wall_s:.2f} s a window): two identical "
          f"stacks alternating for 60 s: ±{half_width(60, 2):.1f} %; quick's shape "
          f"(3 stacks, 40 s of a 160 s budget): ±{half_width(40, 3):.1f} %; ±5 % would take "
          f"{3 * wall_s * 2 * (1.96 * sigma / math.log1p(0.05)) ** 2:.0f} s of this endpoint")


def split(args: argparse.Namespace) -> None:
    lines = load_lines(Path(args.file))
    if not lines:
        sys.exit(f"spread: {args.file} holds no windows (fix: run `collect` first)")
    for workload in dict.fromkeys(w["endpoint"] for w in lines):
        split_workload(lines, workload)


BIN_S = 0.05
TIMESCALES_S = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)


def completions(db: Path) -> list[float]:
    """Each answered request's end, in seconds from the first request's start."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute('SELECT start, "end" FROM oha').fetchall()
    origin = min(start for start, _ in rows)
    return sorted(end - origin for _, end in rows)


def timescale_spread(ends: Sequence[float], window_s: float, skip_s: float = 0.5
                     ) -> tuple[float, float, int] | None:
    """(sd of log requests/s between windows of ``window_s``, sd between adjacent
    windows' difference / sqrt 2, windows) over a run's answers after ``skip_s``."""
    last = ends[-1]
    count = int((last - skip_s) // window_s)
    if count < 4:
        return None
    rates = [0] * count
    for end in ends:
        index = int((end - skip_s) // window_s)
        if 0 <= index < count:
            rates[index] += 1
    if min(rates) == 0:
        return None
    logs = [math.log(r / window_s) for r in rates]
    adjacent = [b - a for a, b in itertools.pairwise(logs)]
    return statistics.stdev(logs), statistics.stdev(adjacent) / math.sqrt(2), count


def _one_endpoint(endpoint: str) -> tuple[Any, Workload, OhaDriver, Any]:
    """quick's experiment on one endpoint in turns, its workload, an oha that keeps its
    per-request database, and the default CPU plan."""
    experiment = quick(StudyOptions(endpoints=(endpoint,), side_by_side=False))
    driver = OhaDriver()
    driver.keep_latencies = True
    return experiment, experiment.workloads[0], driver, default_cpu_plan()


def timescale(args: argparse.Namespace) -> None:
    experiment, workload, driver, cpu_plan = _one_endpoint(args.endpoint)
    print(f"one start of {experiment.baseline.name}, {args.endpoint}, {args.repeat} x "
          f"{args.seconds:g} s without a break; {cpu_plan.describe()}", file=sys.stderr)
    found: dict[float, list[tuple[float, float, int]]] = {w: [] for w in TIMESCALES_S}
    with (host_executor(driver, cpu_plan, experiment) as executor,
          executor.scratch() as scratch, contextlib.ExitStack() as alive):
        alive.callback(executor.stopped)
        running = alive.enter_context(executor.launch(experiment.baseline, workload.request))
        warm = workload.load.model_copy(update={"duration_s": WARMUP_S, "requests": None})
        executor.send(running, workload, warm, scratch)
        for _ in range(args.repeat):
            load = workload.load.model_copy(update={"duration_s": args.seconds,
                                                    "requests": None})
            executor.measure(running, workload, load, scratch)
            ends = completions(scratch / "measure" / REQUESTS_DB)
            for window_s in TIMESCALES_S:
                spread = timescale_spread(ends, window_s)
                if spread is not None:
                    found[window_s].append(spread)
    print("| window | windows | sd between windows | adjacent sd / sqrt 2 | ratio | "
          "an alternating pair's half-width per minute |")
    print("|---|---|---|---|---|---|")
    for window_s, runs in found.items():
        if not runs:
            continue
        between = math.sqrt(statistics.fmean(r[0] ** 2 for r in runs))
        adjacent = math.sqrt(statistics.fmean(r[1] ** 2 for r in runs))
        windows = sum(r[2] for r in runs)
        # Alternating A B A B in windows of window_s, no switching cost: a minute holds
        # 60 / (2 window_s) pairs, each a difference with sd sqrt 2 x adjacent.
        pairs = 60 / (2 * window_s)
        half = 1.96 * math.sqrt(2) * adjacent / math.sqrt(pairs)
        print(f"| {window_s:g} s | {windows} | {pct(between)} | {pct(adjacent)} | "
              f"{adjacent / between:.2f} | ±{100 * math.expm1(half):.1f} % |")


# -- alternate: switch the load, not the stack --------------------------------------
SETTLE_S = (0.0, 0.05, 0.1, 0.15, 0.25, 0.5)
TAIL_S = 0.02  # the end of a window left out: the stop lands a few ms either side


def segments(ends: Sequence[float], gap_s: float) -> list[list[float]]:
    """A driver's answers split where it was stopped: a gap longer than ``gap_s``."""
    found: list[list[float]] = [[ends[0]]]
    for before, end in itertools.pairwise(ends):
        if end - before > gap_s:
            found.append([])
        found[-1].append(end)
    return found


def window_rates(ends: Sequence[float], window_s: float, settle_s: float
                 ) -> list[tuple[float, float]]:
    """(resumed at, requests/s) of each window a driver ran between two stops, counted
    from ``settle_s`` after it resumed (its first answers are the ones that waited
    while it was stopped) to just before it was stopped; the first and last windows
    (alone at the start, together at the end) are left out."""
    length = window_s - settle_s - TAIL_S
    found = []
    for part in segments(ends, gap_s=window_s / 2)[1:-1]:
        resumed = part[0]
        count = sum(1 for end in part if resumed + settle_s < end <= resumed + settle_s + length)
        if count:
            found.append((resumed, count / length))
    return found


def _drivers(count: int, timeout_s: float = 10.0) -> list[Any]:
    """The ``count`` oha processes this benchmark started, in the order of their side."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found: dict[int, Any] = {}
        for proc in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if proc.name() == "oha":
                    side = next(int(a.split("side-")[1].split("/")[0])
                                for a in proc.cmdline() if "side-" in a)
                    found[side] = proc
        if len(found) == count:
            return [found[i] for i in range(count)]
        time.sleep(0.005)
    raise RuntimeError("the load drivers did not start")


def paired_differences(a: list[tuple[float, float]], b: list[tuple[float, float]]
                       ) -> list[tuple[float, float]]:
    """(time, log A - log B) of each B window against the mean of the A windows on both
    of its sides (A B A: drift that is linear over the three cancels)."""
    found = []
    for at, rate in b:
        before = [r for t, r in a if t < at]
        after = [r for t, r in a if t > at]
        if before and after:
            found.append((at, (math.log(before[-1]) + math.log(after[0])) / 2 - math.log(rate)))
    return found


def block_half_width(diffs: list[tuple[float, float]], block_s: float
                     ) -> tuple[float, float, int] | None:
    """(mean log difference, its 95 % half-width, blocks) from the means of
    non-overlapping ``block_s`` blocks: adjacent pairs share drift, blocks far less."""
    if not diffs:
        return None
    origin = diffs[0][0]
    blocks: dict[int, list[float]] = {}
    for at, d in diffs:
        blocks.setdefault(int((at - origin) // block_s), []).append(d)
    means = [statistics.fmean(v) for v in blocks.values() if v]
    if len(means) < 3:
        return None
    se = statistics.stdev(means) / math.sqrt(len(means))
    return statistics.fmean(means), 1.96 * se, len(means)


def _switched(executor: HostExecutor, stacks: list[Any], workload: Workload, scratch: Path,
              seconds: float, window_s: float) -> list[list[float]]:
    """Both stacks driven by an oha of their own for ``seconds``, one stopped (SIGSTOP)
    while the other drives, switched every ``window_s``: each driver's answer times."""
    import signal
    import threading

    import psutil

    load = workload.load.model_copy(update={"duration_s": seconds + 1.0, "requests": None})
    worker = threading.Thread(target=executor.measure_together,
                              args=(stacks, workload, load, scratch))
    worker.start()
    try:
        ohas = _drivers(2)
        ohas[1].suspend()
        began, active, switches = time.monotonic(), 0, 0
        while time.monotonic() - began < seconds:
            switches += 1
            time.sleep(max(0.0, began + switches * window_s - time.monotonic()))
            ohas[active].suspend()
            active = 1 - active
            ohas[active].resume()
    finally:  # both resumed, whatever happened: oha ends at its deadline
        for proc in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGCONT)
        worker.join()
    return [completions(scratch / f"side-{i}" / REQUESTS_DB) for i in (0, 1)]


def _restarted(executor: HostExecutor, stacks: list[Any], workload: Workload, scratch: Path,
               seconds: float) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Today's in-turns design on the same two warm stacks: A B A B ..., oha started anew
    for each 1 s window; (start, requests/s) of each stack's windows."""
    windows: tuple[list[tuple[float, float]], list[tuple[float, float]]] = ([], [])
    load = workload.load.model_copy(update={"duration_s": WINDOW_S, "requests": None})
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        for side, stack in enumerate(stacks):
            at = time.monotonic()
            window = executor.measure(stack, workload, load, scratch)
            windows[side].append((at, window.load.rps))
    return windows


def _scored(a: list[tuple[float, float]], b: list[tuple[float, float]], wall_s: float,
            block_s: float, **keys: Any) -> dict[str, Any] | None:
    found = block_half_width(paired_differences(a, b), block_s)
    if found is None:
        return None
    mean, half, blocks = found
    row = {**keys, "mean": mean, "half": half, "per_minute": half * math.sqrt(wall_s / 60),
           "blocks": blocks, "windows": len(a) + len(b),
           "rps": statistics.fmean(r for _, r in a + b)}
    print(json.dumps(row), file=sys.stderr)
    return row


def alternate(args: argparse.Namespace) -> None:
    """Two identical warm stacks (A/A) alternated for ``--seconds`` in each design: oha
    kept running per stack and switched by SIGSTOP/SIGCONT every 0.25 / 0.5 / 1 s, and
    today's (oha anew per 1 s window); every design scored alike: each B window against
    the A windows on both of its sides, the 95 % half-width from ``--block`` s blocks of
    such pairs, scaled to one minute of measuring."""
    experiment, workload, driver, cpu_plan = _one_endpoint(args.endpoint)
    print(f"two starts of {experiment.baseline.name} (A/A), {args.endpoint}; {args.repeat} x "
          f"{args.seconds:g} s per design; {cpu_plan.describe()}", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    with (host_executor(driver, cpu_plan, experiment) as executor,
          contextlib.ExitStack() as alive):
        alive.callback(executor.stopped)
        stacks = [alive.enter_context(executor.launch(
            experiment.baseline.model_copy(update={"name": name}), workload.request))
            for name in ("a", "b")]
        warm = workload.load.model_copy(update={"duration_s": WARMUP_S, "requests": None})
        for _ in range(args.repeat):
            for window_s in args.windows:
                with executor.scratch() as scratch:
                    for stack in stacks:
                        executor.send(stack, workload, warm, scratch)
                    began = time.monotonic()
                    ends = _switched(executor, stacks, workload, scratch, args.seconds,
                                     window_s)
                    wall_s = time.monotonic() - began
                    if args.keep:
                        import shutil
                        for i in (0, 1):
                            shutil.copy(scratch / f"side-{i}" / REQUESTS_DB,
                                        Path(args.keep) / f"{window_s}-{i}.db")
                for settle_s in SETTLE_S:
                    if settle_s < window_s / 2:
                        row = _scored(window_rates(ends[0], window_s, settle_s),
                                      window_rates(ends[1], window_s, settle_s),
                                      wall_s, args.block, design="switched",
                                      window_s=window_s, settle_s=settle_s)
                        rows += [row] if row else []
            with executor.scratch() as scratch:
                for stack in stacks:
                    executor.send(stack, workload, warm, scratch)
                began = time.monotonic()
                a, b = _restarted(executor, stacks, workload, scratch, args.seconds)
                row = _scored(a, b, time.monotonic() - began, args.block, design="oha anew",
                              window_s=WINDOW_S, settle_s=0.0)
                rows += [row] if row else []
    print("| design | window | settle | runs | mean A/A difference | half-width per minute "
          "(rms over runs) | requests/s |")
    print("|---|---|---|---|---|---|---|")
    key = lambda r: (r["design"], r["window_s"], r["settle_s"])  # noqa: E731
    for (design, window_s, settle_s), group in itertools.groupby(sorted(rows, key=key), key=key):
        runs = list(group)
        rms = math.sqrt(statistics.fmean(r["per_minute"] ** 2 for r in runs))
        means = ", ".join(f"{100 * math.expm1(r['mean']):+.1f}" for r in runs)
        print(f"| {design} | {window_s:g} s | {settle_s:g} s | {len(runs)} | {means} % | "
              f"±{100 * math.expm1(rms):.1f} % | "
              f"{statistics.fmean(r['rps'] for r in runs):.0f} |")

def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--rounds", type=int, default=4)
    c.add_argument("--passes", type=int, default=6)
    c.add_argument("--endpoints", default="sync-small,sync-big")
    c.add_argument("--out", default="spread.jsonl")
    c.add_argument("--lead", type=float, default=0.0,
                   help="also passes whose every visit sends LEAD s of discarded load first")
    c.add_argument("--gauge", action="store_true",
                   help="run observe.speed's gauge on the driver CPU throughout")
    s = sub.add_parser("split")
    s.add_argument("file")
    t = sub.add_parser("timescale")
    t.add_argument("--endpoint", default="sync-small")
    t.add_argument("--seconds", type=float, default=30.0)
    t.add_argument("--repeat", type=int, default=3)
    a = sub.add_parser("alternate")
    a.add_argument("--endpoint", default="sync-small")
    a.add_argument("--seconds", type=float, default=30.0)
    a.add_argument("--repeat", type=int, default=3)
    a.add_argument("--windows", type=lambda t: [float(x) for x in t.split(",")],
                   default=[0.25, 0.5, 1.0])
    a.add_argument("--block", type=float, default=5.0,
                   help="seconds of pairs averaged into one block for the interval")
    a.add_argument("--keep", help="copy each run's per-request databases into this dir")
    args = parser.parse_args(argv)
    {"collect": collect, "split": split, "timescale": timescale,
     "alternate": alternate}[args.command](args)


if __name__ == "__main__":
    main()
