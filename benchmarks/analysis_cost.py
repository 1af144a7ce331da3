"""What the analysis and the live report cost a session between blocks, as runs pile up.

    .venv/bin/python benchmarks/analysis_cost.py [--sessions 3] [--variants 3,8]
        [--rounds 40,15] [--profiles both|with|without]

Runs real ``ExperimentSession``s (result store, report.md after every block, the stopping
rule) on the tests' FakeExecutor, so that nothing but servelab's own bookkeeping takes
time: 4 workloads x V variants, measured in 3 slices in turns, a stopping rule that is
never satisfied (precision 0.01 %) so that it adds one round after another up to
``--rounds`` starts per variant. With profiles every window carries folded stacks
shaped like the seed app's (``PREFIX``, ``FRAMES``, ``POOL``), written to disk as
``--profile`` writes them. The stack has 5 processes (nginx master and worker, app master and two
workers) with user and system time.

The figure is a block's analysis and report time, whatever the code does: the stopping
rule's (from the block's last result to its word on the next round) plus report.md
rewritten (every event handler of the session's in the block: they write it first).
Printed per block: runs so far, then the median and the range over ``--sessions``
sessions. Prints figures; asserts
nothing. No servers: CPU only (run it under the machine lock).
"""

from __future__ import annotations

import argparse
import io
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rich.console import Console
from support import FakeClock, FakeExecutor

from servelab.host.cpus import CpuPlan
from servelab.measuring import Runner, RunnerEvents
from servelab.measuring.executor import Window
from servelab.observe.profile import WindowProfile
from servelab.prepare.building import experiment_from_dict
from servelab.results.records import ProcessUsage
from servelab.session import ExperimentSession

WORKLOADS = 4
PREFIX, FRAMES = 15, 20  # frames shared by every stack; at most this many more
POOL, PER_WINDOW = 200, 120  # distinct stacks of a workload; sampled in one window


def experiment(variants: int, rounds: int) -> Any:
    return experiment_from_dict(
        {
            "name": "analysis-cost",
            "repetitions": 2,
            "slices": 3,
            "baseline": {"name": "base"},
            "variants": [
                {"name": f"v{i}", "proxy": {"transport": "unix", "upstream_keepalive": i}}
                for i in range(1, variants)
            ],
            "workloads": [
                {"name": f"w{i}", "request": {"path": "/"}, "load": {"duration_s": 3.0}}
                for i in range(WORKLOADS)
            ],
            "warmup": {"max_rounds": 1, "duration_s": 0.5},
            "stopping": {"precision_pct": 0.01, "budget_s": 1e9, "max_repetitions": rounds},
        },
        source="benchmark",
    )


class Executor(FakeExecutor):
    """The tests' fake with a realistic stack's processes and, optionally, profiles."""

    def __init__(self, rng: random.Random, profiles: bool, clock: FakeClock) -> None:
        def level(variant: str, start: int, tick: int, workload: str) -> float:
            # Identical stacks: the rule keeps every workload in every round.
            return 1000 * math.exp(rng.gauss(0, 0.03))

        super().__init__(level, clock=clock, seconds_per_window=1.0)
        self.rng = rng
        self.profiles = profiles
        # Shaped like the seed app's real profiles (~190 stacks a run, ~34 frames deep, a
        # shared start): a common prefix, then one of 6 functions at each further depth.
        prefix = [f"start{d} (runpy.py:{d})" for d in range(PREFIX)]
        self.pools = {
            f"w{w}": [
                ";".join(["app workers", *prefix] + [
                    f"f{w}_{d}_{rng.randrange(6)} (app/m{d}.py:{10 * d})"
                    for d in range(rng.randrange(FRAMES // 2, FRAMES))
                ])
                for _ in range(POOL)
            ]
            for w in range(WORKLOADS)
        }
        self.first_launch: float | None = None  # when the block after a gap began

    def launch(self, spec: Any, probe: Any) -> Any:
        if self.first_launch is None:
            self.first_launch = time.perf_counter()
        return super().launch(spec, probe)

    def _window(self, stack: Any, workload: Any, load: Any) -> Window:
        window = super()._window(stack, workload, load)
        cpu = window.usage[0].cpu_s
        usage = tuple(
            ProcessUsage(role=role, pid=10 * stack.start + n, name=role, cpu_s=cpu * share,
                         peak_rss_bytes=50 * 2**20, system_s=cpu * share * 0.2)
            for n, (role, share) in enumerate(
                (("nginx", 0.01), ("nginx", 0.24), ("app", 0.01), ("app", 0.37), ("app", 0.37))
            )
        )
        profile = None
        if self.profiles:
            stacks = self.rng.sample(self.pools[workload.name], PER_WINDOW)
            profile = WindowProfile(
                {s: self.rng.randrange(1, 20) for s in stacks}, (10 * stack.start + 2,)
            )
        return Window(window.started, window.load, usage, window.observed,
                      window.neighbour_share, profile=profile)


def session(variants: int, rounds: int, profiles: bool, seed: int) -> list[tuple[int, float]]:
    """(runs so far, seconds) for every block of one session: the stopping rule's analysis
    (from the block's last result to the rule's word) plus every rewrite of report.md in
    the block (the session's event handlers, which write it before anything else)."""
    rng = random.Random(seed)
    clock = FakeClock()
    executor = Executor(rng, profiles, clock)
    blocks: list[tuple[int, float]] = []
    state: dict[str, Any] = {"runs": 0, "last": 0.0, "spent": 0.0}

    def measure(experiment: Any, store: Any, cpu_plan: Any, *, events: RunnerEvents,
                **kwargs: Any) -> Any:
        def timed(handler: Any) -> Any:
            def call(*args: Any) -> None:
                began = time.perf_counter()
                handler(*args)
                state["spent"] += time.perf_counter() - began

            return call

        def on_result(result: Any) -> None:
            events.on_result(result)
            state["runs"] += 1
            state["last"] = time.perf_counter()

        def on_round(plan: Any, outlook: Any) -> None:
            rule = time.perf_counter() - state["last"]  # the rule decided since the last run
            timed(events.on_round)(plan, outlook)
            blocks.append((state["runs"], state["spent"] + rule))
            state["spent"] = 0.0

        timed_events = RunnerEvents(
            on_launch=timed(events.on_launch), on_measure=timed(events.on_measure),
            on_result=on_result, on_slice=timed(events.on_slice), on_round=on_round,
            on_note=timed(events.on_note), on_driver=events.on_driver,
        )
        return Runner(
            experiment, store, executor, timed_events, kwargs["previous"], clock=clock
        ).run()

    quiet = Console(file=io.StringIO())
    with tempfile.TemporaryDirectory(prefix="servelab-bench-") as out:
        ExperimentSession(
            experiment(variants, rounds), CpuPlan("0", "1", cpu_priority=False), Path(out),
            console=quiet, out=quiet, measure=measure,
        ).run()
    return blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--variants", default="3,8", help="variants per experiment (list)")
    parser.add_argument("--rounds", default="40,15", help="starts per variant (one per --variants)")
    parser.add_argument("--profiles", choices=("both", "with", "without"), default="both")
    parser.add_argument("--every", type=int, default=1, help="print every N-th block")
    args = parser.parse_args()
    modes = {"both": (False, True), "with": (True,), "without": (False,)}[args.profiles]
    for variants, rounds in zip(
        map(int, args.variants.split(",")), map(int, args.rounds.split(",")), strict=True
    ):
        for profiles in modes:
            began = time.perf_counter()
            sessions = [session(variants, rounds, profiles, seed) for seed in range(args.sessions)]
            took = time.perf_counter() - began
            print(f"\n## {WORKLOADS} workloads x {variants} variants, up to {rounds} starts, "
                  f"{'with' if profiles else 'without'} profiles: {args.sessions} sessions, "
                  f"{took:.1f} s in all")
            print("| runs so far | analysis + report in the block, median (s) | min … max (s) |")
            print("|---|---|---|")
            blocks = len(min(sessions, key=len))
            for k in range(0, blocks, args.every):
                runs = sessions[0][k][0]
                times = [s[k][1] for s in sessions if s[k][0] == runs]
                print(f"| {runs} | {statistics.median(times):.3f} | "
                      f"{min(times):.3f} … {max(times):.3f} |")
            totals = [sum(t for _, t in s) for s in sessions]
            print(f"| all blocks | {statistics.median(totals):.2f} | "
                  f"{min(totals):.2f} … {max(totals):.2f} |")


if __name__ == "__main__":
    main()
