"""Issue "Your real traffic": how fast `servelab traffic` reads an access log, and its
peak memory on a large one (the log is streamed: memory must not grow with its size).
Prints figures; asserts nothing.

    .venv/bin/python benchmarks/traffic_parse.py [--gigabytes 1.0] [--runs 3] [--keep LOG]

Makes a synthetic combined-format log of the Django app (`servelab traffic --make-log`,
a daily curve, bursts, a Zipf mix) of about --gigabytes, then runs `servelab traffic LOG`
--runs times, each a fresh process: its wall time, lines per second, and its peak
resident memory (the kernel's maxrss of that process, from wait4). The same on a log a
hundredth the size shows whether memory grows with the log. The log is deleted after
(--keep: written there and kept).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVELAB = str(Path(sys.executable).with_name("servelab"))
RATE = 2000.0  # the synthetic log's mean requests/s


def make_log(path: Path, lines: int) -> None:
    subprocess.run(
        [SERVELAB, "traffic", "--make-log", str(path), "--app", "django",
         "--duration", f"{lines / RATE:.0f}s", "--rate", f"{RATE:g}", "--top", "3"],
        check=True, stdout=subprocess.DEVNULL,
    )


def read_once(path: Path) -> tuple[float, float]:
    """One `servelab traffic LOG` process: its wall time (s) and peak RSS (MiB)."""
    began = time.monotonic()
    process = subprocess.Popen([SERVELAB, "traffic", str(path), "--top", "3"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.monotonic() - began
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"servelab traffic failed: {process.stderr.read().decode()}")
    process.stderr.close()
    return seconds, usage.ru_maxrss / 1024


def figures(label: str, path: Path, runs: int) -> None:
    lines = sum(1 for _ in path.open("rb"))
    size = path.stat().st_size
    measured = [read_once(path) for _ in range(runs)]
    rates = [lines / s for s, _ in measured]
    rss = [m for _, m in measured]
    print(f"{label}: {size / 2**30:.3f} GiB, {lines:,} lines; {runs} runs: "
          f"{statistics.median(rates):,.0f} lines/s [{min(rates):,.0f}, {max(rates):,.0f}], "
          f"wall {statistics.median(s for s, _ in measured):.1f} s, peak RSS "
          f"{statistics.median(rss):.1f} MiB [{min(rss):.1f}, {max(rss):.1f}]", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the large log here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="traffic-parse-") as scratch:
        probe = Path(scratch) / "probe.log"
        make_log(probe, 20_000)
        per_line = probe.stat().st_size / sum(1 for _ in probe.open("rb"))
        lines = int(args.gigabytes * 2**30 / per_line)
        big = args.keep or Path(scratch) / "big.log"
        small = Path(scratch) / "small.log"
        began = time.monotonic()
        make_log(big, lines)
        print(f"made {big} ({lines:,} lines at {per_line:.0f} bytes) in "
              f"{time.monotonic() - began:.0f} s", flush=True)
        make_log(small, lines // 100)
        figures("a hundredth", small, args.runs)
        figures("the large log", big, args.runs)


if __name__ == "__main__":
    main()
