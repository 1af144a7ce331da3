"""The holding curve's coverage in simulation: how often the 90 % intervals of the rate held
in 9 trials of 10 and in half of them hold the known truth, over many simulated searches
of known curves (a steep edge, wide bands, a drifting curve) and queues (a soft and a
sharp knee, with the machine's drift), with the half-widths and the trials taken.

    .venv/bin/python benchmarks/curve_coverage.py --searches 200

It runs the capacity curve's own tests (tests/unit/capacity/test_curve*.py) with more
searches per case (SERVELAB_CURVE_SEARCHES; the suite runs 24-30), which print the table
and assert each case's coverage; about 2 minutes for 200 on one core.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=200)
    args = parser.parse_args()
    tests = [str(ROOT / "tests/unit/capacity/test_curve.py"),
             str(ROOT / "tests/unit/capacity/test_curve_queues.py")]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *tests],
        env={**os.environ, "SERVELAB_CURVE_SEARCHES": str(args.searches)}, cwd=ROOT,
        check=False,
    )
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
