"""Issue "Your real traffic": how fast `servelab traffic` reads an access log, and its
peak memory on a large one (the log is streamed: memory must not grow with its size),
beside GoAccess reading the same log in the same run. Prints figures; asserts nothing.

    flock /tmp/servelab-cpu.lock .venv/bin/python benchmarks/traffic_parse.py \\
        [--gigabytes 0.1] [--runs 3] [--format combined|apache|json] [--goaccess] \\
        [--cpu 1] [--log LOG] [--keep LOG]

Makes a synthetic combined-format log of the Django app (`servelab traffic --make-log`,
a daily curve, bursts, a Zipf mix) of about --gigabytes, rewritten in --format: apache
is Apache's `LogFormat "%t %>s %D \\"%r\\" %h %b \\"%{User-Agent}i\\""`, json nginx's
escape=json format with the combined format's variables as keys (read by `auto`, no
--log-field). --log reads that log instead (in --format). Then --runs times, each a fresh
process pinned to --cpu with taskset: `servelab traffic LOG` (its wall time, lines per
second, peak resident memory: the kernel's maxrss of that process, from wait4) and, with
--goaccess, GoAccess on the same log right after it, writing its JSON report (no HTML).
servelab's start-up (`servelab traffic --help`, timed the same way) is given apart, and
its lines/s with it taken out. The log is deleted after (--keep: written there and kept).
GoAccess is Debian's `goaccess` package (apt-get install goaccess).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVELAB = str(Path(sys.executable).with_name("servelab"))
RATE = 2000.0  # the synthetic log's mean requests/s
COMBINED = re.compile(r'(\S+) (\S+) (\S+) \[([^\]]+)\] "([^"]*)" (\S+) (\S+) "([^"]*)" "([^"]*)"')
SERVELAB_FORMAT = {"combined": "auto", "apache": '%t %>s %D "%r" %h %b "%{User-Agent}i"',
                   "json": "auto"}
GOACCESS_FORMAT = {
    "combined": ["--log-format=COMBINED"],
    "apache": ['--log-format=[%d:%t %^] %s %D "%r" %h %b "%u"', "--date-format=%d/%b/%Y",
               "--time-format=%T"],
    "json": ['--log-format={"time_local":"%d:%t %^","remote_addr":"%h","request":"%r",'
             '"status":"%s","body_bytes_sent":"%b","http_referer":"%R",'
             '"http_user_agent":"%u"}', "--date-format=%d/%b/%Y", "--time-format=%T"],
}


def make_log(path: Path, lines: int, fmt: str) -> None:
    """A synthetic log of about ``lines`` lines in ``fmt``."""
    combined = path if fmt == "combined" else path.with_suffix(".combined")
    subprocess.run(
        [SERVELAB, "traffic", "--make-log", str(combined), "--app", "django",
         "--duration", f"{lines / RATE:.0f}s", "--rate", f"{RATE:g}", "--top", "3"],
        check=True, stdout=subprocess.DEVNULL,
    )
    if fmt == "combined":
        return
    with combined.open() as source, path.open("w") as out:
        for line in source:
            fields = COMBINED.fullmatch(line.rstrip("\n"))
            assert fields is not None, line
            host, _, user, when, request, status, size, referer, agent = fields.groups()
            if fmt == "apache":
                out.write(f'[{when}] {status} 1234 "{request}" {host} {size} "{agent}"\n')
            else:
                out.write(json.dumps({
                    "time_local": when, "remote_addr": host,
                    "remote_user": "" if user == "-" else user, "request": request,
                    "status": status, "body_bytes_sent": size,
                    "http_referer": "" if referer == "-" else referer,
                    "http_user_agent": agent,
                }, separators=(",", ":")) + "\n")
    combined.unlink()


def timed(command: list[str], cpu: int) -> tuple[float, float]:
    """One process pinned to ``cpu``: its wall time (s) and peak RSS (MiB)."""
    began = time.monotonic()
    process = subprocess.Popen(["taskset", "-c", str(cpu), *command],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.monotonic() - began
    assert process.stderr is not None
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[0]} failed: {process.stderr.read().decode()[-2000:]}")
    process.stderr.close()
    return seconds, usage.ru_maxrss / 1024


def spread(values: list[float], unit: str, digits: int = 0) -> str:
    return (f"{statistics.median(values):,.{digits}f}{unit} "
            f"[{min(values):,.{digits}f}, {max(values):,.{digits}f}]")


def figures(path: Path, fmt: str, runs: int, cpu: int, goaccess: bool) -> None:
    lines = sum(1 for _ in path.open("rb"))
    print(f"{path.name}: {fmt}, {path.stat().st_size / 2**20:,.0f} MiB, {lines:,} lines; "
          f"{runs} runs on CPU {cpu}, interleaved", flush=True)
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    startup: list[float] = []
    with tempfile.TemporaryDirectory(prefix="goaccess-") as scratch:
        report = str(Path(scratch) / "report.json")
        for _ in range(runs):
            startup.append(timed([SERVELAB, "traffic", "--help"], cpu)[0])
            ours.append(timed([SERVELAB, "traffic", str(path), "--top", "3",
                               "--log-format", SERVELAB_FORMAT[fmt]], cpu))
            if goaccess:
                theirs.append(timed(["goaccess", str(path), "--no-global-config",
                                     *GOACCESS_FORMAT[fmt], "-o", report], cpu))
    start = statistics.median(startup)
    print(f"  servelab traffic: {spread([lines / s for s, _ in ours], ' lines/s')}, "
          f"{spread([lines / max(s - start, 1e-9) for s, _ in ours], ' lines/s')} without "
          f"its start-up ({start:.2f} s), peak RSS {spread([m for _, m in ours], ' MiB', 1)}",
          flush=True)
    if goaccess:
        print(f"  GoAccess:         {spread([lines / s for s, _ in theirs], ' lines/s')}, "
              f"peak RSS {spread([m for _, m in theirs], ' MiB', 1)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--gigabytes", type=float, default=0.1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--format", choices=sorted(SERVELAB_FORMAT), default="combined")
    parser.add_argument("--goaccess", action="store_true",
                        help="also time GoAccess on the same log, in the same run")
    parser.add_argument("--cpu", type=int, default=1, help="the CPU both are pinned to")
    parser.add_argument("--log", type=Path, help="read this log (in --format); make none")
    parser.add_argument("--keep", type=Path, help="write the log here and keep it")
    args = parser.parse_args()
    if args.goaccess and shutil.which("goaccess") is None:
        raise SystemExit("GoAccess is not installed: apt-get install goaccess")
    if args.log is not None:
        figures(args.log, args.format, args.runs, args.cpu, args.goaccess)
        return
    with tempfile.TemporaryDirectory(prefix="traffic-parse-") as scratch:
        probe = Path(scratch) / "probe.log"
        make_log(probe, 20_000, args.format)
        per_line = probe.stat().st_size / sum(1 for _ in probe.open("rb"))
        lines = int(args.gigabytes * 2**30 / per_line)
        log = args.keep or Path(scratch) / f"access.{args.format}.log"
        began = time.monotonic()
        make_log(log, lines, args.format)
        print(f"made {log} ({lines:,} lines at {per_line:.0f} bytes) in "
              f"{time.monotonic() - began:.0f} s", flush=True)
        figures(log, args.format, args.runs, args.cpu, args.goaccess)


if __name__ == "__main__":
    main()
