"""Where does run-to-run variance come from: inside one running stack, or from restarting it?

    .venv/bin/python benchmarks/restart_variance.py [--starts 6] [--windows 4] [--duration 3]
        [--endpoint async-small] [--upstream-keepalive 8] [--workers 2] [--backlog 2048]
        [--hashseed 0] [--no-cpu-priority]

Starts the stack ``--starts`` times (stack pinned to CPU 0, oha to CPU 1, as servelab
does by default), warms it up, then measures ``--windows`` back-to-back windows of
``--duration`` seconds on each start. Prints each start's windows, then the CV within a
start (pooled), the CV of the start means (between starts) and a one-way ANOVA split of
the variance. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import psutil

from servelab.config.load import LoadSpec, RequestSpec
from servelab.config.stack import StackSpec
from servelab.host.cgroups import cpu_group
from servelab.host.procs import JANITOR
from servelab.launch import launch_stack
from servelab.plugins.driver import get_driver, run_load
from servelab.prepare.checks import describe_stack
from servelab.studies.seeds import SEED_ENDPOINTS, SEED_ITEM_BODY, SEED_PROXY, SEED_SERVER


def stack_spec(args: argparse.Namespace) -> StackSpec:
    env = {"PYTHONHASHSEED": args.hashseed} if args.hashseed is not None else {}
    proxy = {**SEED_PROXY, "transport": "unix", "upstream_keepalive": args.upstream_keepalive}
    if args.no_proxy:
        proxy = {"kind": "none"}
    return StackSpec.model_validate(
        {
            "app": {"env": env},
            "server": {**SEED_SERVER, "workers": args.workers, "backlog": args.backlog},
            "proxy": proxy,
        }
    )


def stack_cpu_s(stack) -> float:
    """CPU seconds used so far by every process of the running stack."""
    total = 0.0
    for proc in stack.processes.values():
        root = psutil.Process(proc.pid)
        for p in (root, *root.children(recursive=True)):
            try:
                t = p.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system
    return total


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=6)
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--endpoint", default="async-small", choices=list(SEED_ENDPOINTS))
    parser.add_argument("--upstream-keepalive", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backlog", type=int, default=2048, help="app server backlog (seeds: 64)")
    parser.add_argument("--no-proxy", action="store_true", help="the app server alone")
    parser.add_argument("--hashseed", help="PYTHONHASHSEED for the app server (default: random)")
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument(
        "--no-cpu-priority", action="store_true", help="no cgroup CPU weight for stack + driver"
    )
    args = parser.parse_args()

    spec = stack_spec(args)
    request = RequestSpec(method="POST", path=SEED_ENDPOINTS[args.endpoint], body=SEED_ITEM_BODY)
    load = LoadSpec(concurrency=args.concurrency, duration_s=args.duration)
    warm = LoadSpec(concurrency=args.concurrency, duration_s=args.warmup_s)
    driver = get_driver("oha")
    print(f"{describe_stack(spec)}; {args.endpoint}; c={args.concurrency}; stack CPU 0, oha CPU 1")
    per_start: list[list[float]] = []
    costs: list[list[float]] = []
    errors = 0
    with (
        JANITOR.running(),
        tempfile.TemporaryDirectory(prefix="servelab-bench-") as tmp,
        cpu_group(favoured=not args.no_cpu_priority, per_process=True) as group,
        cpu_group(favoured=not args.no_cpu_priority) as driver_group,
    ):
        prefix = driver_group.wrap([]) if driver_group else []
        for start in range(args.starts):
            with launch_stack(spec, probe=request, cpus="0", quota=group) as stack:
                url = stack.url(request.path)
                run_load(driver, url, request, warm, Path(tmp), cpus="1", prefix=prefix)
                windows, cost, idle, others = [], [], [], []
                for _ in range(args.windows):
                    before = stack_cpu_s(stack)
                    cpu0 = psutil.cpu_times(percpu=True)[0]
                    measured = run_load(
                        driver, url, request, load, Path(tmp), cpus="1", prefix=prefix
                    )
                    windows.append(measured.rps)
                    errors += measured.requests_total - measured.ok_responses
                    used = stack_cpu_s(stack) - before
                    cost.append(1e6 * used / measured.requests_total)
                    after = psutil.cpu_times(percpu=True)[0]
                    wall = sum(after) - sum(cpu0)
                    idle.append((after.idle - cpu0.idle) / wall)
                    others.append(max(0.0, wall - (after.idle - cpu0.idle) - used) / wall)
            costs.append(cost)
            per_start.append(windows)
            print(
                f"start {start + 1}: "
                + " ".join(f"{w:7.0f}" for w in windows)
                + f"   mean {statistics.mean(windows):7.0f}  CV {100 * cv(windows):4.1f} %"
                + "   stack CPU µs/req " + " ".join(f"{c:5.0f}" for c in cost)
                + "   CPU0 idle % " + " ".join(f"{100 * i:3.0f}" for i in idle)
                + "   CPU0 others % " + " ".join(f"{100 * o:3.0f}" for o in others)
            )
    means = [statistics.mean(w) for w in per_start]
    within = statistics.mean([statistics.variance(w) for w in per_start if len(w) > 1] or [0])
    grand = statistics.mean([x for w in per_start for x in w])
    print(f"grand mean {grand:.0f} req/s; {errors} requests not answered 2xx/3xx")
    print(f"CV within a start (pooled): {100 * within**0.5 / grand:.2f} %")
    print(f"CV of the start means:      {100 * cv(means):.2f} %")
    print(f"CV of first windows only:   {100 * cv([w[0] for w in per_start]):.2f} %")
    # Between-start variance component (one-way random effects, method of moments).
    between = max(0.0, statistics.variance(means) - within / args.windows) if args.starts > 1 else 0
    print(f"variance share from restarts: {100 * between / (between + within or 1):.0f} %")


if __name__ == "__main__":
    main()
