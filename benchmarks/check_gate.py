"""Issue "servelab in CI": does `servelab check` tell a planted slowdown from noise?
Prints figures; asserts nothing.

    .venv/bin/python benchmarks/check_gate.py [--same 10] [--slow 5] [--percent 10]
        [--design auto|in-turns|side-by-side]

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
    base: Path, candidate: Path, body: Path, results: Path, design: str = "auto"
) -> tuple[int, float, Path]:
    """One `servelab check`: its exit code, wall time (from the moment it has the machine)
    and result directory."""
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # waiting for the machine is not the check's time
        began = time.monotonic()
        done = subprocess.run(
            [SERVELAB, "check", "--app", "seedapp:app", "--app-dir", str(candidate),
             "--baseline-dir", str(base), "--method", "POST", "--path", "/async/items/",
             "--body-file", str(body), "--results", str(results), *DESIGN_FLAGS[design]],
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--same", type=int, default=10)
    parser.add_argument("--slow", type=int, default=5)
    parser.add_argument("--percent", type=float, default=10.0)
    parser.add_argument("--design", choices=sorted(DESIGN_FLAGS), default="auto")
    args = parser.parse_args()
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
