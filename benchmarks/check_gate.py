"""Issue "servelab in CI": does `servelab check` tell a planted slowdown from noise?
Prints figures; asserts nothing.

    .venv/bin/python benchmarks/check_gate.py [--same 10] [--slow 5] [--percent 10]
        [--design auto|in-turns|side-by-side]
    .venv/bin/python benchmarks/check_gate.py --rounds 10 --percents 100,10 \
        --fail-if 'rps < -20%' --fail-if 'errors > 0' --budget 2m

The second form is the shared runner's question (which defaults decide there): rounds of
one identical check and one per planted percentage, interleaved, so that the hour's
drift falls on every kind alike; the thresholds and budget are passed to check as given.

Two copies of the seed app (FastAPI, POST /async/items/) in their own app dirs, checked
with the defaults (`--fail-if "rps < -5%" --fail-if "errors > 0"`, 3-minute budget), as a
user runs it (a subprocess, timed):

- same: both dirs identical, N times: exit 0 expected (no threshold crossed).
- design: as check decides on this machine (auto), or forced (--in-turns, --side-by-side).
- slow: the candidate spins PERCENT % more CPU per request (SERVELAB_EXTRA_WORK_US), sized
  from the whole stack's CPU per request (nginx + app server) that the identical checks
  measured: exit 1 expected.

Each check holds /tmp/servelab-cpu.lock (flock) while it runs, so no other benchmark
or integration test of this machine runs beside it; its wall time starts once it has it.
"""

from __future__ import annotations

import argparse
import fcntl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servelab.results.store import ResultStore
from servelab.studies.seeds import SEED_ITEM_BODY

SERVELAB = str(Path(sys.executable).with_name("servelab"))
LOCK = "/tmp/servelab-cpu.lock"
SEED_APP = "from servelab.apps.seed_fastapi import app  # noqa: F401\n"
SLOW_APP = (
    "import os\n\nos.environ['SERVELAB_EXTRA_WORK_US'] = '{extra_us}'\n"
    "from servelab.apps.seed_fastapi import app  # noqa: E402, F401\n"
)


DESIGN_FLAGS = {"auto": [], "in-turns": ["--in-turns"], "side-by-side": ["--side-by-side"]}


def check(
    base: Path, candidate: Path, body: Path, results: Path, design: str = "auto",
    extra: tuple[str, ...] = (),
) -> tuple[int, float, Path]:
    """One `servelab check`: its exit code, wall time (from the moment it has the machine)
    and result directory."""
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # waiting for the machine is not the check's time
        began = time.monotonic()
        done = subprocess.run(
            [SERVELAB, "check", "--app", "seedapp:app", "--app-dir", str(candidate),
             "--baseline-dir", str(base), "--method", "POST", "--path", "/async/items/",
             "--body-file", str(body), "--results", str(results), *DESIGN_FLAGS[design],
             *extra],
            capture_output=True, text=True,
        )
        wall = time.monotonic() - began
    rows = [line for line in done.stdout.splitlines() if line.startswith("| `")]
    print(f"  exit {done.returncode}, {wall:.0f} s: " + "; ".join(rows))
    if done.returncode not in (0, 1, 10):
        print(done.stderr[-2000:])
    latest = max((p for p in results.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return done.returncode, wall, latest


def stack_cpu_us(result_dir: Path) -> float:
    """The baseline stack's CPU per request (every process of the stack), in µs."""
    store = ResultStore.open(result_dir)
    runs = [r for r in store.runs() if r.variant == "baseline"]
    cpu = sum(p.cpu_s for r in runs for p in r.processes)
    return 1e6 * cpu / sum(r.load.requests_total for r in runs)


def summary(label: str, codes: list[int], walls: list[float]) -> None:
    counts = {code: codes.count(code) for code in sorted(set(codes))}
    print(
        f"{label}: exit codes {counts} over {len(codes)} checks; wall time min "
        f"{min(walls):.0f} s, median {statistics.median(walls):.0f} s, max {max(walls):.0f} s"
    )


def interleaved(args: argparse.Namespace) -> None:
    """Rounds of an identical check and a check per planted percentage."""
    extra = tuple(
        [flag for threshold in args.fail_if for flag in ("--fail-if", threshold)]
        + (["--budget", args.budget] if args.budget else [])
    )
    percents = [float(p) for p in args.percents.split(",")]
    with tempfile.TemporaryDirectory(prefix="servelab-check-gate-") as scratch:
        root = Path(scratch)
        base, results = root / "base", root / "results"
        for where in (base, results):
            where.mkdir()
        (base / "seedapp.py").write_text(SEED_APP)
        body = root / "item.json"
        body.write_text(SEED_ITEM_BODY)
        print(f"thresholds and budget: {' '.join(extra) or 'check defaults'}; "
              f"{args.rounds} rounds of identical, " + ", ".join(f"+{p:g} %" for p in percents))
        codes: dict[str, list[int]] = {"identical": []}
        walls: dict[str, list[float]] = {"identical": []}
        slow_dirs: dict[str, Path] = {}
        for round_number in range(args.rounds):
            print(f"round {round_number + 1}: identical")
            code, wall, result = check(base, base, body, results, args.design, extra)
            codes["identical"].append(code)
            walls["identical"].append(wall)
            if not slow_dirs:  # sized on the first identical check's stack CPU per request
                cpu_us = stack_cpu_us(result)
                for percent in percents:
                    label = f"+{percent:g} % work"
                    slow_dirs[label] = root / f"slow-{percent:g}"
                    slow_dirs[label].mkdir()
                    (slow_dirs[label] / "seedapp.py").write_text(
                        SLOW_APP.format(extra_us=round(percent / 100 * cpu_us)))
                    codes[label], walls[label] = [], []
                print(f"  stack CPU per request {cpu_us:.0f} µs: planted "
                      + ", ".join(f"{round(p / 100 * cpu_us)} µs" for p in percents))
            for label, candidate in slow_dirs.items():
                print(f"round {round_number + 1}: {label}")
                code, wall, _ = check(base, candidate, body, results, args.design, extra)
                codes[label].append(code)
                walls[label].append(wall)
        for label in codes:
            summary(label, codes[label], walls[label])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--same", type=int, default=10)
    parser.add_argument("--slow", type=int, default=5)
    parser.add_argument("--percent", type=float, default=10.0)
    parser.add_argument("--design", choices=sorted(DESIGN_FLAGS), default="auto")
    parser.add_argument("--rounds", type=int, help="the interleaved form: this many rounds")
    parser.add_argument("--percents", default="100,10", help="planted, in %% (with --rounds)")
    parser.add_argument("--fail-if", action="append", default=[], help="passed to check")
    parser.add_argument("--budget", help="passed to check")
    args = parser.parse_args()
    if args.rounds:
        interleaved(args)
        return
    with tempfile.TemporaryDirectory(prefix="servelab-check-gate-") as scratch:
        root = Path(scratch)
        base, slow, results = root / "base", root / "slow", root / "results"
        for where in (base, slow, results):
            where.mkdir()
        (base / "seedapp.py").write_text(SEED_APP)
        body = root / "item.json"
        body.write_text(SEED_ITEM_BODY)
        same_codes, same_walls, cpu_us = [], [], []
        print(f"identical versions, {args.same} checks:")
        for _ in range(args.same):
            code, wall, result = check(base, base, body, results, args.design)
            same_codes.append(code)
            same_walls.append(wall)
            cpu_us.append(stack_cpu_us(result))
        extra_us = round(args.percent / 100 * statistics.median(cpu_us))
        print(f"stack CPU per request (median of {len(cpu_us)} checks): "
              f"{statistics.median(cpu_us):.0f} µs; planted: {extra_us} µs "
              f"({args.percent:g} %)")
        (slow / "seedapp.py").write_text(SLOW_APP.format(extra_us=extra_us))
        slow_codes, slow_walls = [], []
        print(f"candidate {args.percent:g} % slower, {args.slow} checks:")
        for _ in range(args.slow):
            code, wall, _ = check(base, slow, body, results, args.design)
            slow_codes.append(code)
            slow_walls.append(wall)
        summary("identical", same_codes, same_walls)
        summary(f"+{args.percent:g} % work", slow_codes, slow_walls)


if __name__ == "__main__":
    main()
