"""How faithfully the replay driver keeps an access log's schedule at a given rate, from
one CPU: send lag p50/p99, the mix per route, the inter-arrival KS distance, the driver's
CPU. The target is an nginx of the benchmark's own that answers every path with 200 at
once (on the other CPU), so that what is measured is the sender, not a stack that cannot
keep up.

    .venv/bin/python benchmarks/replay_fidelity.py --rates 1000,5000 --runs 5 --seconds 20
    .venv/bin/python benchmarks/replay_fidelity.py --driver locust --locust-processes 2 \
        --driver-cpu 1 --rates 300,1000 --runs 3 --seconds 10
    .venv/bin/python benchmarks/replay_fidelity.py --beside-vegeta --rates 5000,10000,20000 \
        --runs 5 --seconds 10

Each run replays a synthetic log (servelab.traffic.synthetic, the sleepy app's shop paths,
no daily curve and no bursts: a steady Poisson stream at the rate, stamped in whole
seconds as access logs are) through servelab's own driver path (``plugins.driver.run_load``,
pinned to --driver-cpu). Rates are interleaved run by run. Prints a line per run and a
summary per rate (median and range over the runs).

``--beside-vegeta`` also runs vegeta's own CLI (``vegeta attack``, VEGETA_VERSION: the
vegeta the sender was built on until it had its own connections) after each run of the
sender, or before it on every other run, at the same mean rate as a constant rate, for
the same seconds, on the same CPU, against the same nginx, with the same requests in the
schedule's order (vegeta's targets format, the POST bodies as files). The first use
installs it with go into servelab's cache (``GOBIN=DIR go install
github.com/tsenart/vegeta/v12@VEGETA_VERSION``; --vegeta takes another binary). Its
send lag: vegeta's n-th hit is due at (n + 1) / rate after its start, which it does not
write down; the start is taken as the one that makes the earliest hit's lag 0 (in
vegeta's favour by the true lag of its most punctual hit, microseconds). Its latency, as
the sender's, is counted from each hit's intended time.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from servelab.config.load import LoadSpec, RequestSpec
from servelab.host.paths import go_tool_path
from servelab.host.procs import free_port
from servelab.load.locust import LocustDriver
from servelab.load.vegeta import VegetaDriver
from servelab.plugins.driver import LoadDriver, run_load
from servelab.traffic.fidelity import MAX_LAG_P99_MS, MAX_UNSENT_SHARE, percentile
from servelab.traffic.formats import log_format
from servelab.traffic.reading import read_log
from servelab.traffic.schedule import BodyTemplate, Schedule, build_schedule
from servelab.traffic.synthetic import write_synthetic_log

VEGETA_VERSION = "v12.13.0"
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


def busy_cpu_s(cpus: str) -> float:
    """CPU seconds the machine's CPUs ``cpus`` (a taskset list of single CPUs) have been
    busy, whatever ran on them (/proc/stat)."""
    wanted = {f"cpu{c}" for c in cpus.split(",")}
    busy = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *ticks = line.split()
            if name in wanted:
                values = [int(t) for t in ticks]
                busy += sum(values) - values[3] - values[4]  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


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


def make_schedule(rate: float, seconds: float, seed: int, workdir: Path) -> tuple[Path, Schedule]:
    """A synthetic log of ``seconds`` at ``rate`` made into a schedule file (its bodies
    beside it, ``.bodies.json``)."""
    log = workdir / f"log-{rate:g}-{seed}.log"
    write_synthetic_log(log, "sleepy", seconds, rate, seed=seed, bursts=False, daily="off")
    # The shop's one POST route gets a body, so that every logged request goes out.
    bodies = {"/api/v1/cart/*": BodyTemplate('{"product": 1, "quantity": 2}')}
    schedule = build_schedule(read_log([log], log_format("combined")), bodies=bodies,
                              seed=seed)
    path = workdir / f"schedule-{rate:g}-{seed}.tsv"
    schedule.write(path)
    log.unlink()
    return path, schedule


def one_run(
    rate: float, seconds: float, seed: int, port: int, cpu: str, workdir: Path,
    driver: LoadDriver,
) -> dict:
    path, schedule = make_schedule(rate, seconds, seed, workdir)
    load = LoadSpec(
        model="replay", schedule=str(path), requests=len(schedule.requests),
        concurrency=1000 if isinstance(driver, VegetaDriver) else 100, timeout_s=10.0,
        max_time_s=schedule.duration_s + 60,
    )
    scratch = workdir / f"run-{rate:g}-{seed}"
    busy = busy_cpu_s(cpu)
    measured = run_load(driver, f"http://127.0.0.1:{port}/", RequestSpec(), load,
                        scratch, cpus=cpu)
    busy = busy_cpu_s(cpu) - busy
    replay = measured.replay
    assert replay is not None
    shutil.rmtree(scratch, ignore_errors=True)
    return {
        "sender": "servelab" if isinstance(driver, VegetaDriver) else driver.name,
        "rate": rate, "seed": seed, "mean_rate": schedule.mean_rate(),
        "peak_second": schedule.peak_rate(), "scheduled": replay.scheduled, "sent": replay.sent,
        "lag_p50_ms": replay.lag_p50_ms, "lag_p99_ms": replay.lag_p99_ms,
        "lag_max_ms": replay.lag_max_ms, "mix_error_points": replay.max_mix_error_points,
        "ks": replay.ks_distance, "kept": replay.kept,
        "driver_cpu_share": measured.driver_cpu_s / measured.duration_s,
        # the sender's CPU busy with anything else meanwhile (another's job: not a quiet run)
        "others_cpu_share": max(0.0, busy - measured.driver_cpu_s) / measured.duration_s,
        "latency_p99_ms": measured.latency_p99_ms, "errors": measured.errors,
        "driver_peak_rss_mb": measured.driver_peak_rss_bytes / 2**20,
    }


def vegeta_cli() -> Path:
    """vegeta's CLI at VEGETA_VERSION in servelab's cache, installed with go the first time."""
    target = go_tool_path(f"vegeta-{VEGETA_VERSION}")
    if os.access(target, os.X_OK):
        return target
    go = shutil.which("go") or "/usr/local/go/bin/go"
    module = f"github.com/tsenart/vegeta/v12@{VEGETA_VERSION}"
    if not os.access(go, os.X_OK):
        raise SystemExit(f"replay_fidelity: --beside-vegeta needs go to install {module} "
                         f"(or --vegeta PATH)")
    print(f"installing vegeta {VEGETA_VERSION} into {target} (go install {module}, once)",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="servelab-vegeta-") as gobin:
        subprocess.run([go, "install", module], env={**os.environ, "GOBIN": gobin}, check=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(Path(gobin) / "vegeta", target)
    return target


def vegeta_targets(schedule_path: Path, port: int, workdir: Path) -> Path:
    """The schedule's requests in vegeta's targets format, in its order."""
    bodies_path = schedule_path.with_suffix(".bodies.json")
    bodies = json.loads(bodies_path.read_text()) if bodies_path.is_file() else []
    body_files = []
    for i, body in enumerate(bodies):
        body_file = workdir / f"vegeta-body-{i}"
        body_file.write_text(body["body"])
        body_files.append((body["content_type"], body_file))
    out = workdir / "vegeta-targets.txt"
    with schedule_path.open() as lines, out.open("w") as f:
        for line in lines:
            _offset, method, target, number = line.rstrip("\n").split("\t")
            f.write(f"{method} http://127.0.0.1:{port}{target}\n")
            if 0 <= int(number) < len(body_files):
                content_type, body_file = body_files[int(number)]
                f.write(f"Content-Type: {content_type}\n@{body_file}\n")
            f.write("\n")
    return out


def vegeta_run(
    exe: Path, rate: float, seconds: float, seed: int, port: int, cpu: str, workdir: Path,
    max_workers: int,
) -> dict:
    """vegeta's CLI at ``rate`` (constant) for ``seconds``, the schedule's requests."""
    path, _schedule = make_schedule(rate, seconds, seed, workdir)
    targets = vegeta_targets(path, port, workdir)
    results = workdir / "vegeta-results.bin"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy = busy_cpu_s(cpu)
    subprocess.run(
        ["taskset", "-c", cpu, str(exe), "attack", "-targets", str(targets),
         "-rate", f"{round(rate)}/1s", "-duration", f"{seconds:g}s",
         "-max-workers", str(max_workers), "-timeout", "10s", "-output", str(results)],
        check=True, stdout=subprocess.DEVNULL,
    )
    busy = busy_cpu_s(cpu) - busy
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    encoded = subprocess.run([str(exe), "encode", "--to", "csv", str(results)],
                             check=True, capture_output=True, text=True).stdout
    results.unlink()
    interval = 1_000_000_000 // round(rate)  # as vegeta's constant pacer
    hits = [(int(row[8]), int(row[0]), int(row[2]), int(row[1]))
            for row in csv.reader(encoded.splitlines())]
    # hit n is due at start + (n + 1) * interval; the start is not written down
    start = min(at - (seq + 1) * interval for seq, at, _latency, _code in hits)
    lags = sorted((at - start - (seq + 1) * interval) / 1e6 for seq, at, _l, _c in hits)
    latencies = sorted((at - start - (seq + 1) * interval + latency) / 1e6
                       for seq, at, latency, code in hits if code != 0)
    return {
        "sender": "vegeta-cli", "rate": rate, "seed": seed, "mean_rate": rate,
        "peak_second": rate, "scheduled": int(rate * seconds), "sent": len(hits),
        "lag_p50_ms": percentile(lags, 50), "lag_p99_ms": percentile(lags, 99),
        "lag_max_ms": lags[-1] if lags else 0.0,
        "mix_error_points": None, "ks": None,  # one rate, the targets in turn: not measured
        "kept": bool(lags) and percentile(lags, 99) <= MAX_LAG_P99_MS
        and len(hits) >= int(rate * seconds) * (1 - MAX_UNSENT_SHARE),
        "driver_cpu_share": cpu_s / seconds,  # as the sender's: its start-up in it
        "others_cpu_share": max(0.0, busy - cpu_s) / seconds,
        "latency_p99_ms": percentile(latencies, 99),
        "errors": sum(1 for _s, _a, _l, code in hits if not 200 <= code < 400),
        "driver_peak_rss_mb": None,
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
    parser.add_argument("--beside-vegeta", action="store_true",
                        help="each run of the sender beside one of vegeta's own CLI at the "
                             "same rate, constant (installed with go the first time)")
    parser.add_argument("--vegeta", type=Path, help="vegeta's CLI (default: installed "
                        f"{VEGETA_VERSION} in servelab's cache)")
    parser.add_argument("--vegeta-max-workers", type=int, default=1000,
                        help="vegeta's -max-workers (the sender's connections: 1000)")
    args = parser.parse_args()
    # This process's own work (the logs, reading each run's record) stays off the sender's
    # CPU, so that the sender's CPU is busy with the sender alone ("others" near 0).
    os.sched_setaffinity(0, {args.target_cpu})
    if args.beside_vegeta and args.driver != "vegeta":
        parser.error("--beside-vegeta compares servelab's own sender (--driver vegeta)")
    vegeta_exe = (args.vegeta or vegeta_cli()) if args.beside_vegeta else None
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
                    runs: list[Callable[[], dict]] = [functools.partial(
                        one_run, rate, args.seconds, seed, port, args.driver_cpu, workdir,
                        driver,
                    )]
                    if vegeta_exe is not None:
                        runs.append(functools.partial(
                            vegeta_run, vegeta_exe, rate, args.seconds, seed, port,
                            args.driver_cpu, workdir, args.vegeta_max_workers,
                        ))
                        if seed % 2:  # each goes first in every other run
                            runs.reverse()
                    for run in runs:
                        row = run()
                        rows.append(row)
                        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v
                                          for k, v in row.items()}), flush=True)
                        if args.out:
                            with args.out.open("a") as f:
                                f.write(json.dumps(row) + "\n")
    print(f"\nreplay fidelity: {args.runs} runs of {args.seconds:g} s per rate, target nginx "
          f"on CPU {args.target_cpu}, sender ({args.driver}"
          + (f", {args.locust_processes} processes" if args.driver == "locust" else "")
          + (f"; beside vegeta {VEGETA_VERSION}'s CLI, a constant rate" if vegeta_exe else "")
          + f") on CPU {args.driver_cpu}; others on its CPU: its busy time beyond the "
          "sender's, a share of the run (more than a few % is another job, not a quiet run)")
    for sender in dict.fromkeys(r["sender"] for r in rows):
        for rate in rates:
            mine = [r for r in rows if r["rate"] == rate and r["sender"] == sender]
            def spread(key: str, rows: list[dict] = mine) -> str:
                values = sorted(r[key] for r in rows if r[key] is not None)
                if not values:
                    return "n/a"
                return f"{statistics.median(values):.3f} [{values[0]:.3f}, {values[-1]:.3f}]"
            print(f"{sender:>10} {rate:>7,.0f} req/s (mean {spread('mean_rate')}, peak second "
                  f"{spread('peak_second')}): lag p50 {spread('lag_p50_ms')} ms, p99 "
                  f"{spread('lag_p99_ms')} ms, max {spread('lag_max_ms')} ms; sent "
                  f"{sum(r['sent'] for r in mine):,} of {sum(r['scheduled'] for r in mine):,}; "
                  f"mix error {spread('mix_error_points')} points; KS {spread('ks')}; "
                  f"driver CPU {spread('driver_cpu_share')}, others on its CPU "
                  f"{spread('others_cpu_share')}; latency p99 "
                  f"{spread('latency_p99_ms')} ms; kept {sum(r['kept'] for r in mine)} of "
                  f"{len(mine)}")
    sys.exit(0)


if __name__ == "__main__":
    main()
