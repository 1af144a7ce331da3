"""Same verdicts whatever the driver? Reads repeated `servelab study quick` results made
with two drivers (each in its own results directory) and prints, per workload and
variant, every run's change against the baseline with its 95 % interval and verdict.

    flock /tmp/servelab-cpu.lock servelab study quick --results /tmp/oha            # x3
    flock /tmp/servelab-cpu.lock servelab study quick --driver locust \\
        --locust-processes 2 --results /tmp/locust                               # x3
    python benchmarks/driver_verdicts.py /tmp/oha /tmp/locust [--metric rps_per_cpu]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SHORT = {"better": "better", "worse": "worse", "no significant difference": "n.s.",
         "inconclusive": "inconcl."}


def comparisons(results: Path, metric: str) -> list[dict[str, dict]]:
    """Per stored experiment (oldest first): (workload, variant) -> its comparison."""
    ids = sorted(int(p.name.split("-", 1)[0]) for p in results.glob("*-quick"))
    found = []
    for ident in ids:
        text = subprocess.run(
            [sys.executable, "-m", "servelab", "results", "show", str(ident), "--json",
             "--results", str(results)],
            capture_output=True, text=True, check=True,
        ).stdout
        data = json.loads(text[text.index("{"):])
        found.append(
            {(c["workload"], c["variant"]): c for c in data["comparisons"] if c["metric"] == metric}
        )
    return found


def cell(c: dict) -> str:
    low, high = c["interval_pct"]
    verdict = SHORT.get(c["verdict"], c["verdict"])
    return f"{c['change_pct']:+.1f} [{low:+.1f}, {high:+.1f}] {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--metric", default="rps")
    args = parser.parse_args()
    for results in args.dirs:
        runs = comparisons(results, args.metric)
        print(f"\n{results} ({len(runs)} runs), {args.metric}: change % [95 % interval] verdict")
        keys = sorted({k for run in runs for k in run})
        columns = " | ".join(f"run {i + 1}" for i in range(len(runs)))
        print(f"| workload | variant | {columns} |")
        print("|---|---|" + "---|" * len(runs))
        for key in keys:
            cells = [cell(run[key]) if key in run else "-" for run in runs]
            print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
