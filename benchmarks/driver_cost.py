"""Driver cost: how much CPU each load driver spends per request, and what rate it reaches.

A bare nginx (one worker, ``return 200``) runs pinned to CPU 0; each driver
runs pinned to CPU 1 through ``run_load(cpus="1")`` with keepalive and
concurrency 50: oha and ab for a request count, wrk and Locust (which have none)
for a duration. Locust runs its built-in scenario twice: FastHttpUser
(``locust-fast``) and HttpUser (``locust-http``), one process (``--locust-processes``
adds ``locust-fast-pN``: a master and N workers, all on the driver's CPU); its CPU
includes its start-up (imports, gevent: about half a CPU second, printed apart).
Drivers take turns (round-robin) so that drift hits them alike.
Prints one row per driver: requests/s and driver CPU microseconds per
request (user + system, from wait4), as mean ± half the range of the runs.

    .venv/bin/python benchmarks/driver_cost.py [--repetitions 3] [--requests 20000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from servelab.config.load import LoadSpec, RequestSpec
from servelab.errors import ServelabError
from servelab.host.paths import find_program
from servelab.host.procs import ManagedProcess, free_port
from servelab.plugins.driver import LoadDriver, get_driver, run_load
from servelab.registry import DRIVER_NAMES
from servelab.results.records import LoadMeasurement

STACK_CPU, DRIVER_CPU = "0", "1"
READY_WITHIN_S = 10.0
NGINX_CONF = """\
{user}
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{ return 200 "ok"; }}
    }}
}}
"""


def start_nginx(workdir: Path) -> tuple[ManagedProcess, str]:
    program = find_program("nginx") or "/usr/sbin/nginx"
    port = free_port()
    conf = workdir / "nginx.conf"
    user = "user root;" if os.geteuid() == 0 else ""
    conf.write_text(NGINX_CONF.format(dir=workdir, port=port, user=user))
    proc = ManagedProcess(
        "nginx",
        [program, "-p", str(workdir), "-c", str(conf), "-e", str(workdir / "error.log")],
        log_path=workdir / "nginx.log",
        cpus=STACK_CPU,
    ).start()
    deadline = time.monotonic() + READY_WITHIN_S
    while True:
        if proc.exit_code() is not None:
            raise SystemExit(f"nginx exited with {proc.exit_code()}:\n{proc.log_tail()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}/"
        except OSError:
            if time.monotonic() > deadline:
                proc.stop()
                raise SystemExit(f"nginx did not listen within {READY_WITHIN_S} s") from None
            time.sleep(0.02)


def driver_variants(processes: int) -> list[tuple[str, str, dict]]:
    """(driver name, label, driver options) of every driver measured."""
    found = []
    for name in DRIVER_NAMES:
        model = get_driver(name).options_model
        if model is None:
            found.append((name, name, {}))
            continue
        found.append((name, f"{name}-fast", {"users": ("FastRequestUser",)}))
        found.append((name, f"{name}-http", {"users": ("RequestUser",)}))
        if processes > 1:
            found.append(
                (name, f"{name}-fast-p{processes}",
                 {"users": ("FastRequestUser",), "processes": processes})
            )
    return found


def spread(values: list[float]) -> str:
    """'mean ± half the range', the range covering every run."""
    half = (max(values) - min(values)) / 2
    return f"{statistics.fmean(values):,.1f} ± {half:,.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--requests", type=int, default=20000, help="for oha and ab")
    parser.add_argument("--duration", type=int, default=5, help="seconds, for wrk")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--locust-processes", type=int, default=0, help="also locust-fast-pN")
    parser.add_argument("--only", default="", help="comma list of driver labels to run")
    args = parser.parse_args()

    if not {0, 1} <= os.sched_getaffinity(0):
        sys.exit("needs CPUs 0 and 1 (nginx on one, the driver on the other)")
    drivers: dict[str, LoadDriver] = {}
    for name, label, options in driver_variants(args.locust_processes):
        try:
            get_driver(name, options).executable()
        except ServelabError:
            print(f"skipping {label}: not installed")
            continue
        drivers[label] = get_driver(name, options)
    if args.only:
        drivers = {k: v for k, v in drivers.items() if k in args.only.split(",")}
    timed = {label for label, d in drivers.items() if "request_count" not in d.capabilities}
    loads = {
        name: LoadSpec(
            concurrency=args.concurrency,
            **({"duration_s": args.duration} if name in timed else {"requests": args.requests}),
        )
        for name in drivers
    }
    warmups = {
        name: LoadSpec(
            concurrency=args.concurrency,
            **({"duration_s": 1} if name in timed else {"requests": 2000}),
        )
        for name in drivers
    }
    runs: dict[str, list[LoadMeasurement]] = {name: [] for name in drivers}
    workdir = Path(tempfile.mkdtemp(prefix="servelab-bench-"))
    nginx = None
    try:
        nginx, url = start_nginx(workdir)
        # As servelab's runner does: this process (and so wrk's thread count, one
        # per usable CPU) stays on the driver's CPU, off the stack's.
        os.sched_setaffinity(0, {int(DRIVER_CPU)})
        for name, driver in drivers.items():
            run_load(driver, url, RequestSpec(), warmups[name], workdir / "warmup", cpus=DRIVER_CPU)
        for repetition in range(args.repetitions):
            for name, driver in drivers.items():
                m = run_load(
                    driver, url, RequestSpec(), loads[name], workdir / name, cpus=DRIVER_CPU
                )
                if m.errors:
                    sys.exit(
                        f"{name} saw {m.errors} errors: {m.status_counts} {m.connection_errors}"
                    )
                runs[name].append(m)
                print(
                    f"run {repetition + 1} {name:>14}: {m.rps:>10,.0f} req/s  "
                    f"{m.driver_cpu_us_per_request:6.2f} µs CPU/request  "
                    f"({m.requests_total} requests, {m.driver_cpu_s:.3f} s CPU, "
                    f"peak RSS {m.driver_peak_rss_bytes / 2**20:.0f} MiB)",
                    flush=True,
                )
    except ServelabError as exc:
        sys.exit(f"{exc.one_line()}\n{exc.detail}")
    finally:
        if nginx is not None:
            nginx.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    print(
        f"\nnginx (1 worker, return 200) on CPU {STACK_CPU}; driver on CPU {DRIVER_CPU}; "
        f"keepalive, concurrency {args.concurrency}; oha/ab {args.requests} requests, "
        f"wrk and Locust {args.duration} s; {args.repetitions} runs each; mean ± half the range\n"
    )
    print(f"{'driver':<16}{'version':<22}{'requests/s':>22}{'driver CPU µs/request':>26}")
    for name, measured in runs.items():
        rps = spread([m.rps for m in measured])
        cost = spread([m.driver_cpu_us_per_request for m in measured])
        print(f"{name:<16}{drivers[name].version():<22}{rps:>22}{cost:>26}")


if __name__ == "__main__":
    main()
