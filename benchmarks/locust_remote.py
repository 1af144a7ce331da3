"""Locust workers on another machine for a whole study, against the same study's Locust
worker processes on this machine.

Two network namespaces made here, joined by a veth pair (10.213.N.0/30, N chosen unused;
both deleted at the end): ``servelab study quick --in-turns`` (stacks and Locust's
master, ``--listen`` on its end of the pair) in one; in the other, for ``remote``,
``servelab locust-worker --processes 2``, started once for the whole study, only once
the first master listens. ``local``: the same study in the same namespace with
``--locust-processes 2`` instead (the master and its 2 worker processes beside the
stacks). No warm-up (``--warmup 0``), so that the first stored run is the first master.
Both modes run with ``--access-log``: nginx logs each request's client address and every
run records its requests by client address (``front_requests_by_client``).
Prints per mode: wall time, requests/s per variant and endpoint (each run's, and their
mean), runs; the requests nginx counted from the load's address (the worker namespace's
for remote, 127.0.0.1 for local) against Locust's count, run by run (they must match
exactly), and what else nginx saw in the measured windows; for remote the seconds each
run's master waited for the workers (the first: from the workers' start; the others:
their restart after the previous run), and the requests Locust counted per worker
machine against its total.

Run as root (namespaces), under the CPU lock, on a machine with nothing else measuring:

    flock /tmp/servelab-cpu.lock .venv/bin/python benchmarks/locust_remote.py \\
        [--repetitions 3] [--duration 2] [--endpoints sync-small,...] [--modes remote,local]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import ctrl_c, two_machines, with_default_sigint

MASTER_PORT = 5557


def listening(namespace: str, port: int) -> bool:
    out = subprocess.run(
        ["ip", "netns", "exec", namespace, "ss", "-Hltn", f"sport = :{port}"],
        capture_output=True, text=True,
    ).stdout
    return bool(out.strip())


def run_mode(mode: str, args, work: Path) -> dict:
    servelab = [sys.executable, "-m", "servelab"]
    results = work / f"results-{mode}"
    with two_machines("slbench") as (ns_a, addr_a, ns_b, addr_b):
        study_argv = [
            "nsenter", f"--net=/run/netns/{ns_a}", *servelab, "study", "quick", "--in-turns",
            "--driver", "locust", "-r", str(args.repetitions), "-d", str(args.duration),
            "--slices", "1", "--warmup", "0", "--results", str(results), "--access-log",
        ]  # fmt: skip
        if args.endpoints:
            study_argv += ["--endpoints", args.endpoints]
        if mode == "remote":
            study_argv += ["--expect-workers", "2", "--listen", addr_a]
        else:
            study_argv += ["--locust-processes", "2"]
        log = (work / f"study-{mode}.log").open("w")
        t0 = time.monotonic()
        study = subprocess.Popen(study_argv, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=with_default_sigint)
        worker = None
        worker_after_port_s = None
        try:
            if mode == "remote":
                while not listening(ns_a, MASTER_PORT):
                    if study.poll() is not None:
                        raise SystemExit(f"the study ended first: {work}/study-{mode}.log")
                    time.sleep(0.05)
                port_open = time.monotonic()
                worker = subprocess.Popen(
                    ["ip", "netns", "exec", ns_b, *servelab, "locust-worker", "--master-host",
                     addr_a, "--processes", "2", "--name", "load-b"],
                    stdout=(work / "worker.log").open("w"), stderr=subprocess.STDOUT,
                    start_new_session=True, preexec_fn=with_default_sigint,
                )  # fmt: skip
                worker_after_port_s = time.monotonic() - port_open
            status = study.wait(3600)
            wall = time.monotonic() - t0
        finally:
            # Stopped either way; a hang (killed) is not the benchmark's figure.
            with contextlib.suppress(subprocess.TimeoutExpired):
                ctrl_c(study)
            if worker is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    ctrl_c(worker)
        if status != 0:
            raise SystemExit(f"{mode}: study exit {status}; see {work}/study-{mode}.log")
    runs = [json.loads(line) for line in next(results.glob("*/runs.jsonl")).open()]
    return {"wall": wall, "runs": runs, "worker_after_port_s": worker_after_port_s,
            "load_address": addr_b if mode == "remote" else "127.0.0.1"}


def counted_at_nginx(got: dict) -> None:
    """nginx's count of the load's requests (by client address) against Locust's, per run."""
    address = got["load_address"]
    pairs = [
        ((run.get("front_requests_by_client") or {}).get(address, 0), run["load"]["requests_total"])
        for run in got["runs"]
    ]
    others: dict[str, int] = defaultdict(int)
    for run in got["runs"]:
        for client, n in (run.get("front_requests_by_client") or {}).items():
            if client != address:
                others[client] += n
    equal = sum(1 for nginx, locust in pairs if nginx == locust)
    print(f"  requests counted at nginx from {address}: {sum(n for n, _ in pairs):,}; "
          f"Locust's count {sum(n for _, n in pairs):,}; equal in {equal} of {len(pairs)} "
          f"runs; other clients in the measured windows: {dict(others) or 'none'}")
    for (nginx, locust), run in zip(pairs, got["runs"], strict=True):
        if nginx != locust:
            print(f"    {run['variant']} / {run['workload']} #{run['repetition']}: nginx "
                  f"{nginx:,} vs Locust {locust:,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--endpoints", default="")
    parser.add_argument("--modes", default="remote,local")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="servelab-locust-remote-"))
    print(f"logs and results: {work}")
    figures = {mode: run_mode(mode, args, work) for mode in args.modes.split(",")}
    rps: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for mode, got in figures.items():
        print(f"\n{mode}: {len(got['runs'])} runs, wall {got['wall']:.0f} s")
        for run in got["runs"]:
            rps[(run["workload"], run["variant"])][mode].append(run["load"]["rps"])
        counted_at_nginx(got)
        if mode != "remote":
            continue
        def seconds(run: dict, key: str) -> float:
            return float(run["load"]["driver_details"][f"per run: {key}"].split()[0])

        waited = [seconds(run, "waited for the workers") for run in got["runs"]]
        ready = [seconds(run, "workers ready after") for run in got["runs"]]
        print(f"  workers started {got['worker_after_port_s']:.2f} s after the first "
              f"master's port opened; from each master's start, its last worker ready: "
              f"first run {ready[0]:.2f} s, the others median "
              f"{statistics.median(ready[1:]):.2f} s, max {max(ready[1:]):.2f} s; the load "
              f"started (Locust looks once a second): first {waited[0]:.2f} s, the others "
              f"median {statistics.median(waited[1:]):.2f} s, max {max(waited[1:]):.2f} s")
        by_machine = sum(m["requests"] for run in got["runs"] for m in run["load"]["machines"])
        total = sum(run["load"]["requests_total"] for run in got["runs"])
        print(f"  requests: Locust's total {total:,}, the workers' reports by machine "
              f"{by_machine:,}")
    modes = list(figures)
    print("\nrequests/s, mean of the runs (each run's): " + " | ".join(modes))
    for (workload, variant), by_mode in sorted(rps.items()):
        cells = " | ".join(
            f"{statistics.mean(by_mode[m]):8,.0f} ({', '.join(f'{r:,.0f}' for r in by_mode[m])})"
            if by_mode[m] else "       -"
            for m in modes
        )
        print(f"  {workload:<12} {variant:<22} {cells}")


if __name__ == "__main__":
    main()
