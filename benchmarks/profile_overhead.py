"""Issue "Why": does sampling with py-spy inside the measured windows move the figures?
Prints figures; asserts nothing.

    .venv/bin/python benchmarks/profile_overhead.py [--times 3] [--out DIR]
    .venv/bin/python benchmarks/profile_overhead.py native [--times 3]

The seed app (FastAPI, POST /async/items/, gunicorn + uvicorn worker behind nginx) against
itself with SERVELAB_EXTRA_WORK_US spinning in extra_work(): 3 starts each, measured in
turns (wrk, one 3-second window per start), as `servelab run` measures it, alternately
without and with --profile, TIMES each. For each: wall time, requests/s of each variant,
the answer's change, the stack's CPU per request, and (with --profile) what the Why
section says about extra_work against the planted figure.

``native``: py-spy's own cost with and without ``--native`` (what --profile adds to
tell system calls and waits apart): py-spy records a process that alternates a user-space
loop and a loop of system calls for 4 s at 100 Hz, paused as servelab pauses it, TIMES
each alternately; its CPU seconds (user + system, from its rusage), samples and errors,
and how much work the sampled process got done per CPU second.

Each run holds /tmp/servelab-cpu.lock (flock) while it runs; its wall time starts once it
has it.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servelab.results.store import ResultStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import planted_spin_toml

SERVELAB = str(Path(sys.executable).with_name("servelab"))
LOCK = "/tmp/servelab-cpu.lock"
PLANTED_US = 200
EXPERIMENT = planted_spin_toml("profile-overhead", PLANTED_US, repetitions=3, duration_s=3)


def measure(spec: Path, results: Path, profile: bool, function: str | None = None) -> dict:
    """One ``servelab run`` of ``spec`` (under the lock): its figures; with ``profile``,
    the top contributor of the difference and (``function``) that function's figure and
    rank among every function's."""
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # waiting for the machine is not the run's time
        began = time.monotonic()
        done = subprocess.run(
            [SERVELAB, "-q", "run", str(spec), "--results", str(results),
             *(["--profile"] if profile else [])],
            capture_output=True, text=True, check=False,
        )
        wall = time.monotonic() - began
    if done.returncode != 0:
        print(done.stderr[-2000:])
    latest = max((p for p in results.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    store = ResultStore.open(latest)
    runs = store.runs()

    def mean(variant: str, figure) -> float:
        return statistics.fmean(figure(r) for r in runs if r.variant == variant)

    rps = {v: mean(v, lambda r: r.load.rps) for v in ("base", "spin")}
    row = {
        "profile": profile, "exit": done.returncode, "wall_s": round(wall, 1),
        "rps": {v: round(x, 1) for v, x in rps.items()},
        "change_pct": round(100 * (rps["spin"] / rps["base"] - 1), 2),
        "stack_cpu_us": {
            v: round(mean(v, lambda r: 1e6 * r.stack_cpu_s / r.load.requests_total), 1)
            for v in ("base", "spin")
        },
    }
    if profile:
        from servelab.analysis.explain import explain_all
        from servelab.report.base import ReportInput
        from servelab.report.why import run_profiles

        [explanation] = explain_all(
            run_profiles(ReportInput.from_store(store)), "base", top=1_000_000
        )
        top = explanation.functions[0]
        row["top"] = top.name
        row["top_us"] = round(top.difference, 1)
        row["top_interval"] = [round(x, 1) for x in top.comparison.interval or ()]
        shown = explanation.functions[:5]  # as the report shows them
        row["unexplained_us"] = round(
            explanation.total.difference - sum(c.difference for c in shown), 1
        )
        row["stack_cpu_difference_us"] = round(explanation.total.difference, 1)
        if explanation.inclusive:
            row["inclusive_top"] = explanation.inclusive[0].name
            row["inclusive_top_us"] = round(explanation.inclusive[0].difference, 1)
        if explanation.waited is not None:
            row["waited"] = round(explanation.waited, 2)
        ranked = [c.name for c in explanation.functions]
        if function in ranked:
            mine = explanation.functions[ranked.index(function)]
            row["function_rank"] = ranked.index(function) + 1
            row["function_us"] = round(mine.difference, 1)
            row["function_interval"] = [round(x, 1) for x in mine.comparison.interval or ()]
    return row


TARGET = """
import os, sys, time
print("ready", flush=True)
turns, end = 0, time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for _ in range(20000):
        pass
    for _ in range(200):
        os.getppid()
    turns += 1
t = os.times()
print(turns / (t.user + t.system), flush=True)
"""


def py_spy_cost(native: bool, seconds: float = 4.0) -> dict:
    """One py-spy record of TARGET (under the lock): py-spy's CPU seconds, its samples
    and errors, and the target's turns per CPU second."""
    from servelab.host.profiler import py_spy

    executable = py_spy()
    assert executable is not None, "py-spy is not installed"
    with open(LOCK, "a") as lock, tempfile.TemporaryDirectory() as scratch:
        fcntl.flock(lock, fcntl.LOCK_EX)
        target = subprocess.Popen([sys.executable, "-c", TARGET, str(seconds + 1)],
                                  stdout=subprocess.PIPE, text=True)
        assert target.stdout is not None
        target.stdout.readline()
        spy = subprocess.Popen(
            [executable, "record", "--format", "raw", "--rate", "100", "--duration",
             str(int(seconds)), *(["--native"] if native else []), "--pid", str(target.pid),
             "--output", f"{scratch}/out.folded"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        _, status, usage = os.wait4(spy.pid, 0)
        said = spy.stdout.read() if spy.stdout else ""
        spy.returncode = os.waitstatus_to_exitcode(status)
        rate = float(target.stdout.readline() or "nan")
        target.wait()
    counts = [int(n) for n in re.findall(r"(?:Samples|Errors): (\d+)", said)]
    return {"native": native, "py_spy_cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "samples": counts[0] if counts else None,
            "errors": counts[1] if len(counts) > 1 else None,
            "target_turns_per_cpu_s": round(rate, 1)}


def native_cost(times: int) -> None:
    rows = []
    for _ in range(times):
        for native in (False, True):
            row = py_spy_cost(native)
            rows.append(row)
            print(json.dumps(row), flush=True)
    for native in (False, True):
        mine = [r for r in rows if r["native"] is native]
        cpu = [r["py_spy_cpu_s"] for r in mine]
        turns = [r["target_turns_per_cpu_s"] for r in mine]
        print(f"{'--native' if native else 'plain'}: py-spy CPU {statistics.fmean(cpu):.3f} s "
              f"per 4 s (min {min(cpu):.3f}, max {max(cpu):.3f}); the target's turns per CPU "
              f"second {statistics.fmean(turns):.1f} (min {min(turns):.1f}, max {max(turns):.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", choices=["stacks", "native"], default="stacks")
    parser.add_argument("--times", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.part == "native":
        native_cost(args.times)
        return
    with tempfile.TemporaryDirectory(prefix="servelab-profile-overhead-") as scratch:
        out = args.out or Path(scratch)
        out.mkdir(parents=True, exist_ok=True)
        spec = out / "experiment.toml"
        spec.write_text(EXPERIMENT)
        rows = []
        for _ in range(args.times):
            for profile in (False, True):
                row = measure(spec, out / "results", profile)
                rows.append(row)
                print(json.dumps(row), flush=True)
        for profile in (False, True):
            mine = [r for r in rows if r["profile"] is profile]
            label = "with --profile" if profile else "without"
            for variant in ("base", "spin"):
                values = [r["rps"][variant] for r in mine]
                print(f"{label}: {variant} requests/s mean {statistics.fmean(values):.0f} "
                      f"(min {min(values):.0f}, max {max(values):.0f})")
            changes = [r["change_pct"] for r in mine]
            walls = [r["wall_s"] for r in mine]
            print(f"{label}: the answer's change {statistics.fmean(changes):+.1f} % "
                  f"(min {min(changes):+.1f}, max {max(changes):+.1f}); wall "
                  f"{statistics.fmean(walls):.0f} s (min {min(walls):.0f}, max {max(walls):.0f})")


if __name__ == "__main__":
    main()
