"""Does the machine itself pause? cyclictest's way, in Python: on one CPU, at real-time
priority (SCHED_FIFO), sleep 1 ms in a loop and write, per wall-clock second, the longest
oversleep and how many exceeded 10 and 50 ms. A stall seen at that priority is not the
stack's: the kernel or the hypervisor took the CPU.

    .venv/bin/python benchmarks/stall_probe.py --cpu 0 --seconds 420 --out stalls-cpu0.jsonl

Run it beside a benchmark (``capacity.py steady``), one per CPU, and line its seconds up
with the trials' ``started``. It takes about 2-3 % of its CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def probe(cpu: int, seconds: float, out: Path) -> None:
    os.sched_setaffinity(0, {cpu})
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    except PermissionError:
        print("stall_probe: no SCHED_FIFO (not root): stalls include the stack's", file=sys.stderr)
    end = time.monotonic() + seconds
    second, worst, over10, over50 = int(time.time()), 0.0, 0, 0
    with out.open("w") as f:
        while time.monotonic() < end:
            before = time.monotonic()
            time.sleep(0.001)
            late_ms = (time.monotonic() - before - 0.001) * 1000
            now = int(time.time())
            if now != second:
                f.write(json.dumps({"t": second, "worst_ms": round(worst, 2),
                                    "over10": over10, "over50": over50}) + "\n")
                f.flush()
                second, worst, over10, over50 = now, 0.0, 0, 0
            worst = max(worst, late_ms)
            over10 += late_ms > 10
            over50 += late_ms > 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    probe(args.cpu, args.seconds, args.out)


if __name__ == "__main__":
    main()
