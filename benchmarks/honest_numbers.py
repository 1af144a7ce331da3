"""Issue #4's benchmark: A/A, repeatability with and without CPU pinning, and
sensitivity to a planted ~10 % slowdown. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/honest_numbers.py [--repetitions 5] [--duration 10]
        [--upstream-keepalive 0] [--backlog 2048] [--workers 2] [--no-cpu-priority]
        [--slices 1] [--parts 1,2,3] [--out DIR]

1. A/A: the same stack as baseline and variant -> expect "no significant difference".
2. Repeatability: CV of requests/s over the repetitions, sync-small and
   async-small, pinned (stack CPU 0, driver CPU 1) and not pinned.
3. Sensitivity: the app spins ~10 % more CPU per request
   (SERVELAB_EXTRA_WORK_US, sized from the A/A run's measured app CPU per
   request) -> expect "worse" on requests/s.

``--slices K``: every experiment measures each run in K slices interleaved with
the other runs' (servelab.measuring.slices), all stacks alive at once.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from servelab.analysis.analyze import VariantAnalysis, analyze
from servelab.config.experiment import Experiment
from servelab.host.cpus import CpuPlan, default_cpu_plan
from servelab.host.procs import JANITOR
from servelab.measuring import run_experiment
from servelab.prepare.building import experiment_from_dict
from servelab.prepare.checks import describe_stack
from servelab.prepare.environment import collect_environment
from servelab.results.records import RunRecord
from servelab.results.store import ResultStore
from servelab.studies.seeds import SEED_ITEM_BODY, SEED_PROXY, SEED_SERVER

STACK: dict[str, Any] = {"server": SEED_SERVER, "proxy": {**SEED_PROXY, "transport": "unix"}}


def workload(name: str, path: str, duration: float) -> dict[str, Any]:
    return {
        "name": name,
        "request": {"method": "POST", "path": path, "body": SEED_ITEM_BODY},
        "load": {"concurrency": 100, "duration_s": duration},
    }


def run(experiment: Experiment, plan: CpuPlan, root: Path) -> list[RunRecord]:
    store = ResultStore.create(root, experiment, collect_environment())
    with JANITOR.running():
        results = run_experiment(experiment, store, plan)
    store.mark_finished()
    return results


def app_cpu_us_per_request(runs: list[RunRecord]) -> float:
    per_run = [
        sum(p.cpu_s for p in r.processes if p.role == "app") / r.load.requests_total for r in runs
    ]
    return 1e6 * sum(per_run) / len(per_run)


def neighbours(runs: tuple[RunRecord, ...]) -> str:
    shares = [r.neighbour_cpu_share for r in runs if r.neighbour_cpu_share is not None]
    if not shares:
        return ""
    return f"  others on stack CPU max {100 * max(shares):4.1f} %"


def per_run(runs: tuple[RunRecord, ...]) -> str:
    """Each run's requests/s and the stack CPU's speed probe just before it."""
    return "\n".join(
        f"      run {r.repetition}: {r.load.rps:7.0f} req/s, CPU speed "
        + (f"{r.cpu_speed:7.0f}" if r.cpu_speed is not None else "      -")
        for r in sorted(runs, key=lambda r: r.repetition)
    )


def variant_line(v: VariantAnalysis) -> str:
    rps = v.metrics["rps"].summary
    line = f"  {v.workload:12} {v.variant:11} mean {rps.mean:8.1f} req/s  CV {100 * rps.cv:5.2f} %"
    line += neighbours(v.runs) + "\n" + per_run(v.runs)
    if v.comparisons:
        c = v.comparisons["rps"]
        line += f"  -> {c.verdict} ({c.difference_pct:+.2f} %, {c.reason})"
    return line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument(
        "--out", type=Path, help="keep the results here (servelab results list --results DIR)"
    )
    parser.add_argument(
        "--backlog",
        type=int,
        default=2048,
        help="the app server's backlog (the seeds' 64 overflows at 100 clients: 502s)",
    )
    parser.add_argument(
        "--no-cpu-priority", action="store_true", help="no cgroup CPU weight for stack + driver"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="gunicorn workers (the seeds: 2)"
    )
    parser.add_argument(
        "--upstream-keepalive",
        type=int,
        default=0,
        help="nginx upstream keepalive of the stack (0 = a connection per request)",
    )
    parser.add_argument(
        "--slices", type=int, default=1, help="measure each run in this many interleaved slices"
    )
    parser.add_argument(
        "--parts",
        default="1,2,3",
        help="parts to run; 1 (A/A, which also sizes part 3's slowdown) always runs",
    )
    args = parser.parse_args()
    STACK["proxy"] = {**STACK["proxy"], "upstream_keepalive": args.upstream_keepalive}
    STACK["server"] = {**STACK["server"], "backlog": args.backlog, "workers": args.workers}
    parts = set(args.parts.split(","))
    priority = not args.no_cpu_priority
    pinned = replace(default_cpu_plan(), cpu_priority=priority)
    unpinned = CpuPlan(None, None, cpu_priority=priority)
    small = [
        workload("sync-small", "/sync/items/", args.duration),
        workload("async-small", "/async/items/", args.duration),
    ]
    with tempfile.TemporaryDirectory(prefix="servelab-bench-") as scratch:
        root = args.out or Path(scratch)

        print(
            "== 1. A/A (same stack twice), pinned:",
            describe_stack(pinned),
            f"; {args.workers} worker(s), upstream keepalive {args.upstream_keepalive}, "
            f"backlog {args.backlog}, "
            f"{args.duration:g} s runs" + (f" in {args.slices} slices" if args.slices > 1 else ""),
        )
        aa = experiment_from_dict(
            {
                "name": "a-a",
                "repetitions": args.repetitions,
                "slices": args.slices,
                "baseline": {"name": "A", **STACK},
                "variants": [{"name": "A-again"}],
                "workloads": small,
            }
        )
        aa_runs = run(aa, pinned, root)
        analysis = analyze(aa, aa_runs)
        for v in analysis.variants:
            print(variant_line(v))
        speed = [r.cpu_speed for r in aa_runs if r.cpu_speed is not None]
        if speed:
            print(
                f"  CPU speed probe over all {len(speed)} runs: min {min(speed):.0f}, "
                f"max {max(speed):.0f} ({100 * (max(speed) / min(speed) - 1):.1f} % apart)"
            )

        print("\n== 2. Repeatability: CV of requests/s over", args.repetitions, "runs")
        single = experiment_from_dict(
            {
                "name": "repeat",
                "repetitions": args.repetitions,
                "slices": args.slices,
                "baseline": {"name": "A", **STACK},
                "workloads": small,
            }
        )
        plans = [("pinned", pinned)] + ([("not pinned", unpinned)] if "2" in parts else [])
        for label, plan in plans:
            runs = aa_runs if plan == pinned else run(single, plan, root)
            for v in analyze(single, [r for r in runs if r.variant == "A"]).variants:
                rps = v.metrics["rps"].summary
                print(
                    f"  {label:10} {v.workload:12} mean {rps.mean:8.1f} req/s  "
                    f"CV {100 * rps.cv:5.2f} %  (min {rps.minimum:.0f}, max {rps.maximum:.0f})"
                    + neighbours(v.runs)
                )

        if "3" not in parts:
            return
        print("\n== 3. Sensitivity: the app does 10 % more work per request")
        for wl in small:
            # Sized per endpoint: the sync endpoint costs the app more CPU than the async one.
            mine = [r for r in aa_runs if r.variant == "A" and r.workload == wl["name"]]
            extra_us = round(0.10 * app_cpu_us_per_request(mine))
            print(f"  {wl['name']}: the app spins {extra_us} µs more per request")
            slow_stack = {**STACK, "app": {"env": {"SERVELAB_EXTRA_WORK_US": str(extra_us)}}}
            sensitivity = experiment_from_dict(
                {
                    "name": "sensitivity",
                    "repetitions": args.repetitions,
                "slices": args.slices,
                    "baseline": {"name": "as-is", **STACK},
                    "variants": [{"name": "10%-slower", **slow_stack}],
                    "workloads": [wl],
                }
            )
            for v in analyze(sensitivity, run(sensitivity, pinned, root)).variants:
                print(variant_line(v))


if __name__ == "__main__":
    main()
