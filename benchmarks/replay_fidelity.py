"""How faithfully the replay driver keeps an access log's schedule at a given rate, from
one CPU: send lag p50/p99, the mix per route, the inter-arrival KS distance, the driver's
CPU. The target is an nginx of the benchmark's own that answers every path with 200 at
once (on the other CPU), so that what is measured is the sender, not a stack that cannot
keep up.

    .venv/bin/python benchmarks/replay_fidelity.py --rates 1000,5000 --runs 5 --seconds 20
    .venv/bin/python benchmarks/replay_fidelity.py --driver locust --locust-processes 2 \
        --driver-cpu 1 --rates 300,1000 --runs 3 --seconds 10

Each run replays a synthetic log (servelab.traffic.synthetic, the sleepy app's shop paths,
no daily curve and no bursts: a steady Poisson stream at the rate, stamped in whole
seconds as access logs are) through servelab's own driver path (``plugins.driver.run_load``,
pinned to --driver-cpu). Rates are interleaved run by run. Prints a line per run and a
summary per rate (median and range over the runs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from servelab.config.load import LoadSpec, RequestSpec
from servelab.host.procs import free_port
from servelab.load.locust import LocustDriver
from servelab.load.vegeta import VegetaDriver
from servelab.plugins.driver import LoadDriver, run_load
from servelab.traffic.formats import log_format
from servelab.traffic.reading import read_log
from servelab.traffic.schedule import BodyTemplate, build_schedule
from servelab.traffic.synthetic import write_synthetic_log

NGINX_CONF = """worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
daemon off;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  server {{ listen 127.0.0.1:{port} backlog=4096; location / {{ return 200 "ok\\n"; }} }}
}}
"""


@contextlib.contextmanager
def static_nginx(cpu: int, workdir: Path) -> Iterator[int]:
    """An nginx answering 200 to every path on a free loopback port, on ``cpu``; stopped
    and reaped at the end."""
    port = free_port()
    conf = workdir / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=workdir, port=port))
    process = subprocess.Popen(
        ["taskset", "-c", str(cpu), "nginx", "-c", str(conf), "-p", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        import socket

        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("replay_fidelity: nginx did not start")
            time.sleep(0.05)
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def one_run(
    rate: float, seconds: float, seed: int, port: int, cpu: str, workdir: Path,
    driver: LoadDriver,
) -> dict:
    log = workdir / f"log-{rate:g}-{seed}.log"
    write_synthetic_log(log, "sleepy", seconds, rate, seed=seed, bursts=False, daily="off")
    # The shop's one POST route gets a body, so that every logged request goes out.
    bodies = {"/api/v1/cart/*": BodyTemplate('{"product": 1, "quantity": 2}')}
    schedule = build_schedule(read_log([log], log_format("combined")), bodies=bodies,
                              seed=seed)
    path = workdir / f"schedule-{rate:g}-{seed}.tsv"
    schedule.write(path)
    load = LoadSpec(
        model="replay", schedule=str(path), requests=len(schedule.requests),
        concurrency=1000 if isinstance(driver, VegetaDriver) else 100, timeout_s=10.0,
        max_time_s=schedule.duration_s + 60,
    )
    scratch = workdir / f"run-{rate:g}-{seed}"
    measured = run_load(driver, f"http://127.0.0.1:{port}/", RequestSpec(), load,
                        scratch, cpus=cpu)
    replay = measured.replay
    assert replay is not None
    return {
        "rate": rate, "seed": seed, "mean_rate": schedule.mean_rate(),
        "peak_second": schedule.peak_rate(), "scheduled": replay.scheduled, "sent": replay.sent,
        "lag_p50_ms": replay.lag_p50_ms, "lag_p99_ms": replay.lag_p99_ms,
        "lag_max_ms": replay.lag_max_ms, "mix_error_points": replay.max_mix_error_points,
        "ks": replay.ks_distance, "kept": replay.kept,
        "driver_cpu_share": measured.driver_cpu_s / measured.duration_s,
        "latency_p99_ms": measured.latency_p99_ms, "errors": measured.errors,
        "driver_peak_rss_mb": measured.driver_peak_rss_bytes / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,5000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--target-cpu", type=int, default=0)
    parser.add_argument("--driver-cpu", default="1", help="CPUs of the sender (taskset list)")
    parser.add_argument("--driver", choices=("vegeta", "locust"), default="vegeta",
                        help="servelab's replay sender, or Locust's ReplayUser")
    parser.add_argument("--locust-processes", type=int, default=1,
                        help="with --driver locust: worker processes sharing the log")
    parser.add_argument("--out", type=Path, help="also write every run as JSON lines here")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    driver: LoadDriver = VegetaDriver() if args.driver == "vegeta" else LocustDriver(
        options={"processes": args.locust_processes}
    )
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="servelab-replay-bench-") as tmp:
        workdir = Path(tmp)
        with static_nginx(args.target_cpu, workdir) as port:
            for seed in range(args.runs):
                for rate in rates:
                    row = one_run(rate, args.seconds, seed, port, args.driver_cpu, workdir,
                                  driver)
                    rows.append(row)
                    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v
                                      for k, v in row.items()}), flush=True)
                    if args.out:
                        with args.out.open("a") as f:
                            f.write(json.dumps(row) + "\n")
    print(f"\nreplay fidelity: {args.runs} runs of {args.seconds:g} s per rate, target nginx "
          f"on CPU {args.target_cpu}, sender ({args.driver}"
          + (f", {args.locust_processes} processes" if args.driver == "locust" else "")
          + f") on CPU {args.driver_cpu}")
    for rate in rates:
        mine = [r for r in rows if r["rate"] == rate]
        def spread(key: str, rows: list[dict] = mine) -> str:
            values = sorted(r[key] for r in rows)
            return (f"{statistics.median(values):.3f} [{values[0]:.3f}, {values[-1]:.3f}]")
        print(f"{rate:>7,.0f} req/s (mean {spread('mean_rate')}, peak second "
              f"{spread('peak_second')}): lag p50 {spread('lag_p50_ms')} ms, p99 "
              f"{spread('lag_p99_ms')} ms; mix error {spread('mix_error_points')} points; "
              f"KS {spread('ks')}; driver CPU {spread('driver_cpu_share')}; kept "
              f"{sum(r['kept'] for r in mine)} of {len(mine)}")
    sys.exit(0)


if __name__ == "__main__":
    main()
