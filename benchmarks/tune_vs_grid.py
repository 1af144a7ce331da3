"""Issue "servelab tune": does the race find the grid's best in a fraction of its time?
Prints figures; asserts nothing.

    .venv/bin/python benchmarks/tune_vs_grid.py [--tunes 3] [--grid-result DIR]

The space (benchmarks/tune_seed_space.toml): the seed FastAPI app's async-small endpoint
(POST /async/items/, 50 clients) behind nginx; gunicorn + UvicornWorker at workers 1-5 x
transport tcp/unix x upstream keepalive 0/8, plus uvicorn, granian and hypercorn at
workers 1-5: 35 candidates.

- grid: every candidate measured alike, at the quick study's measuring (a 1 s warm-up,
  then 6 s in slices of 1 s, interleaved with the other candidates), 3 fresh starts
  each (the experiment default), as `servelab run` would; its wall time, and each
  candidate's mean requests/s.
- tune: `servelab tune --space benchmarks/tune_seed_space.toml --budget B`, N times, B a
  share of the grid's wall time (default 25 %: the user gives it the time they have); its
  wall time,
  winner and recommendation, and where they stand in the grid: gap to the grid's best
  mean and the grid's own comparison of the two (nested test over the 3 starts).

Each measurement holds /tmp/servelab-cpu.lock (flock); its wall time starts once it has
the machine. Stack on CPU 0, load driver on CPU 1 (servelab's default plan).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servelab.analysis.comparisons import compare_variants
from servelab.analysis.metrics import METRIC_BY_KEY
from servelab.results.store import resolve_result

HERE = Path(__file__).resolve().parent
SPACE = HERE / "tune_seed_space.toml"
LOCK = "/tmp/servelab-cpu.lock"
GRID_SCRIPT = """
import sys
from pathlib import Path
from servelab import api
from servelab.cli.tune import read_tune_table
from servelab.config.run import RunOptions
from servelab.tune.build import build_tune

table = read_tune_table(Path(sys.argv[1]))
spec, _ = build_tune(table, source=sys.argv[1], app=None, request_given=False, budget_s=None)
grid = spec.experiment().model_copy(update={
    "name": "grid", "repetitions": 3, "slices": 6,
    "workloads": tuple(w.model_copy(update={"load": w.load.model_copy(update={"duration_s": 6.0})})
                       for w in spec.experiment().workloads),
})
store = api.run(grid, RunOptions(results_dir=Path(sys.argv[2])))
print("RESULT", store.path)
"""


def locked(argv: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        began = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True)
        return done, time.monotonic() - began


def grid_means(result: Path) -> tuple[dict[str, float], list]:
    store = resolve_result(str(result), result.parent)
    runs = store.runs()
    by: dict[str, list[float]] = {}
    for run in runs:
        by.setdefault(run.variant, []).append(run.load.rps)
    return {name: statistics.fmean(v) for name, v in by.items()}, runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tunes", type=int, default=3)
    parser.add_argument("--grid-result", type=Path, help="reuse a grid measured before")
    parser.add_argument("--grid-wall", type=float, help="its wall time [s]")
    parser.add_argument("--budget-share", type=float, default=0.25,
                        help="each tune's --budget, as a share of the grid's wall time")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="servelab-bench-tune-"))
    if args.grid_result is None:
        grid_argv = [sys.executable, "-c", GRID_SCRIPT, str(SPACE), str(work / "grid")]
        done, grid_wall = locked(grid_argv)
        if done.returncode != 0:
            print(done.stderr[-3000:])
            sys.exit(1)
        grid_dir = Path(next(
            line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("RESULT")
        ))
    else:
        grid_dir, grid_wall = args.grid_result, args.grid_wall or float("nan")
    means, grid_runs = grid_means(grid_dir)
    ranked = sorted(means, key=means.get, reverse=True)
    best = ranked[0]
    print(f"grid: {len(means)} candidates x 3 starts, wall {grid_wall:.0f} s ({grid_dir})")
    for place, name in enumerate(ranked[:8], start=1):
        print(f"  {place}. {name}: {means[name]:,.0f} req/s")
    rps = METRIC_BY_KEY["rps"]
    for number in range(1, args.tunes + 1):
        done, wall = locked([
            sys.executable, "-m", "servelab", "tune", "--space", str(SPACE),
            "--results", str(work / "tunes"), "--budget", f"{args.budget_share * grid_wall:.0f}s",
        ])
        if done.returncode != 0:
            print(f"tune {number}: exit {done.returncode}\n{done.stderr[-3000:]}")
            continue
        tune_dir = max((p for p in (work / "tunes").iterdir() if p.is_dir()),
                       key=lambda p: p.stat().st_mtime)
        document = json.loads((tune_dir / "tune.json").read_text())
        runs = sum(1 for _ in (tune_dir / "runs.jsonl").open())
        for role in ("winner", "recommended"):
            name = document[role]
            gap = 100 * (means[name] / means[best] - 1)
            tied = "same" if name == best else compare_variants(grid_runs, best, name, rps).verdict
            print(f"tune {number} {role}: {name}: grid {means[name]:,.0f} req/s, {gap:+.1f} % "
                  f"against the grid's best {best} ({tied}); rank {ranked.index(name) + 1}")
        print(f"tune {number}: wall {wall:.0f} s = {100 * wall / grid_wall:.0f} % of the grid's; "
              f"{document['rounds']} rounds, {runs} starts measured (grid: {3 * len(means)}); "
              f"over: {document['over']}")


if __name__ == "__main__":
    main()
