"""The `backlog` study at the seed's settings, side by side with the seed's numbers.

Seed (nginx_gunicorn_somaxconn.md): nginx → gunicorn (one sync worker) over a
unix socket, a WSGI app sleeping 2 s per request, ``vegeta -rate=200
-duration=1s -timeout=500s``; with net.core.somaxconn 128: 502 x67, 200 x133
(66.5 % success); with 1024: 200 x200 (100 %), after 6 min 40 s of queueing.

servelab runs the same stacks in private network namespaces (one per
somaxconn value) with oha's open model (``-q 200 -n 200 --latency-correction``)
and prints status counts, success ratio, latency, the listen queue ``ss`` saw,
and nginx's classified error lines. At the seed's 2 s per request this takes
about 11 minutes (one worker drains the queue); ``--sleep 0.2`` about 1.5.

    .venv/bin/python benchmarks/backlog.py [--sleep 2] [--out servelab-results]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from servelab.errors import ServelabError
from servelab.host.cpus import default_cpu_plan
from servelab.host.procs import JANITOR
from servelab.measuring import RunnerEvents, run_experiment
from servelab.observe.attribution import describe_counts
from servelab.prepare.environment import collect_environment
from servelab.results.records import RunRecord
from servelab.results.store import ResultStore
from servelab.studies import StudyOptions
from servelab.studies.failures import backlog, backlog_estimate_s

SEED = {
    "unix-somaxconn-128": "502 x67, 200 x133: 66.5 % (34 s)",
    "unix-somaxconn-1024": "200 x200: 100 % (6 min 41 s)",
}


def row(run: RunRecord) -> list[str]:
    load = run.load
    ok = load.ok_responses
    total = load.requests_total
    queue = run.listen_queue
    return [
        run.variant,
        ", ".join(f"{code} x{n}" for code, n in sorted(load.status_counts.items())),
        str(load.status_counts.get("502", 0)),
        f"{100 * ok / total:.1f} %" if total else "-",
        f"{load.latency_p50_ms / 1000:.1f} / {load.latency_p99_ms / 1000:.1f} / "
        f"{load.latency_max_ms / 1000:.1f}",
        f"{queue.backlog} / {queue.max_queued}" if queue else "-",
        describe_counts(run.log_events),
        SEED.get(run.variant, "504s, no figures"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sleep", type=float, default=2.0, help="seconds per request (seed: 2)")
    parser.add_argument("--out", type=Path, default=Path("servelab-results"))
    args = parser.parse_args()
    options = StudyOptions(sleep_s=args.sleep)
    experiment = backlog(options)
    print(
        f"backlog study, {args.sleep:g} s per request: about "
        f"{backlog_estimate_s(options) / 60:.0f} min",
        flush=True,
    )
    started = time.monotonic()
    events = RunnerEvents(
        on_result=lambda r: print(
            f"  {r.variant}: {r.load.status_counts} in {time.monotonic() - started:.0f} s",
            flush=True,
        )
    )
    try:
        with JANITOR.running():
            store = ResultStore.create(args.out, experiment, collect_environment())
            runs = run_experiment(experiment, store, default_cpu_plan(), events=events)
    except ServelabError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return 2
    header = [
        "variant", "status counts", "502", "success", "latency p50/p99/max [s]",
        "listen backlog / max queued", "nginx log events", "seed (vegeta)",
    ]
    lines = [header, ["---"] * len(header), *(row(r) for r in runs)]
    print()
    for line in lines:
        print("| " + " | ".join(line) + " |")
    print(f"\nwall time {time.monotonic() - started:.0f} s; results in {store.path}")
    for run in runs:
        for note in run.notes:
            print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
