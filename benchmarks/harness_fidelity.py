"""Harness fidelity: servelab's requests/s for one running stack vs oha run by hand.

One stack (the quick study's nginx --unix--> gunicorn[UvicornWorker] x2) is
started once, pinned to CPU 0. Then, alternately, servelab measures it the
way a study does (run_load under the process sampler, driver pinned to CPU 1)
and the same oha command is run by hand (a plain subprocess, also pinned to
CPU 1, its JSON read for requests/s). Prints both series and the difference
of the means; the target is within 3 %.

    .venv/bin/python benchmarks/harness_fidelity.py [--rounds 5] [--requests 5000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from servelab.config.load import LoadSpec, RequestSpec
from servelab.launch import launch_stack
from servelab.load.oha import OhaDriver
from servelab.observe.metrics import ProcessSampler
from servelab.plugins.driver import run_load
from servelab.prepare.checks import describe_stack
from servelab.studies import StudyOptions
from servelab.studies.seeds import quick


def by_hand(oha: str, url: str, body: Path, load: LoadSpec) -> float:
    argv = ["taskset", "--cpu-list", "1", oha, "--no-tui", "--output-format", "json",
            "--disable-compression", "-c", str(load.concurrency), "-n", str(load.requests),
            "-m", "POST", "-T", "application/json", "-D", str(body), url]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=300)
    return float(json.loads(done.stdout)["summary"]["requestsPerSec"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=100)
    args = parser.parse_args()

    experiment = quick(StudyOptions())
    stack = experiment.variants[0]  # nginx-unix
    workload = experiment.workloads[0]  # sync-small
    request: RequestSpec = workload.request
    load = LoadSpec(concurrency=args.concurrency, requests=args.requests)
    driver = OhaDriver()
    servelab_rps: list[float] = []
    hand_rps: list[float] = []
    with launch_stack(stack, probe=request, cpus="0") as running, \
            tempfile.TemporaryDirectory(prefix="servelab-bench-") as scratch:
        url = running.url(request.path)
        body = Path(scratch) / "body.json"
        body.write_text(request.body or "")
        by_hand(driver.executable(), url, body, LoadSpec(concurrency=10, requests=500))  # warm-up
        roots = {role: proc.pid for role, proc in running.processes.items()}
        for round_ in range(args.rounds):
            with ProcessSampler(roots):
                measured = run_load(driver, url, request, load, Path(scratch) / "m", cpus="1")
            servelab_rps.append(measured.rps)
            hand_rps.append(by_hand(driver.executable(), url, body, load))
            print(f"round {round_ + 1}: servelab {servelab_rps[-1]:8.1f} req/s   "
                  f"by hand {hand_rps[-1]:8.1f} req/s", flush=True)
    mean_s, mean_h = statistics.fmean(servelab_rps), statistics.fmean(hand_rps)
    print(f"\nstack: {describe_stack(stack)} on CPU 0; oha on CPU 1; "
          f"{args.rounds} rounds x {args.requests} requests, concurrency {args.concurrency}")
    print(f"servelab mean {mean_s:.1f} req/s (stdev {statistics.stdev(servelab_rps):.1f}); "
          f"by hand mean {mean_h:.1f} req/s (stdev {statistics.stdev(hand_rps):.1f})")
    print(f"difference: {100 * (mean_s - mean_h) / mean_h:+.2f} % (target: within 3 %)")


if __name__ == "__main__":
    main()
