"""ApacheBench (ab): the seeds' load driver, kept for parity with their figures.

The seeds ran ``ab -q -c 100 -n 5000 -T application/json -p body URL``; this
driver builds the same command, plus ``-r`` (count a failed read instead of
aborting the whole run) and ``-s timeout``. ab is closed-model only, speaks
HTTP/1.0, and measures in whole milliseconds.

Reading ab's counters (ab 2.3):

- "Complete requests" counts every request that ended, answered or not:
  it includes "Non-2xx responses", "Length" failures, "Receive" failures
  (the read failed: no answer) and "Write errors" (the request could not be
  sent). "Connect" failures are attempts that never connected and are not in
  it (ab gives up after ten of them and exits, so a run rarely has any).
- "Length" failures are answers whose body length differs from the first
  answer's: normal for a dynamic app. They are answered requests, counted as
  such, not as errors.
- "Exceptions" are poll errors on a socket. On Linux a reset sets the error
  and the readable flag together, so ab counts the same request once under
  Receive and once under Exceptions; only exceptions beyond the receive
  failures are counted, as kind "other".
- ab connects without blocking, so a refused connection also shows up as a
  Receive failure (plus an Exception), not under Connect: with ab, "read"
  errors include connections that were never made.

So: status_counts = {"2xx": complete - non-2xx - receive - write,
"non-2xx": non-2xx} (ab does not tell codes apart; its "non-2xx" includes
3xx), connection_errors = {"connect", "read", "write", "other"}.

Latency mean is the mean of the "Total" row of ab's Connection Times, which
is per request. ab's "Time per request (mean)" is concurrency x wall time /
requests instead: a throughput figure, not a latency.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from servelab.config.load import LoadSpec, RequestSpec
from servelab.host.doctor import Check, check_program
from servelab.host.paths import require_program
from servelab.plugins.driver import LoadDriver, program_output
from servelab.results.records import LoadMeasurement

# With -t alone ab stops after 50000 requests. A duration-only run therefore
# also gets -n duration x this rate, far above what single-threaded ab reaches,
# so the duration is what ends it. (ab reserves memory for -n entries but only
# touches what it uses.)
AB_RATE_CEILING = 1_000_000

_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
LATENCY_KEYS = ("mean", "p50", "p90", "p99", "max")


INSTALL_FIX = "apt-get install apache2-utils (needed only for --driver ab)"


class AbDriver(LoadDriver):
    name = "ab"
    capabilities = frozenset({"request_count", "time_per_request"})

    def __init__(self, program: str | None = None) -> None:
        self._program = program

    def executable(self) -> str:
        if self._program is not None:
            return self._program
        return require_program("ab", INSTALL_FIX)

    def doctor_checks(self) -> list[Check]:
        return [check_program("ab", ["ab", "-V"], required=False, fix=INSTALL_FIX)]

    def version(self) -> str:
        text = program_output([self.executable(), "-V"], "ab -V", "ab")
        match = re.search(r"Version ([^\s,]+)", text)
        return match.group(1) if match else (text.strip().splitlines() or ["unknown"])[0]

    def unsupported(self, request: RequestSpec, load: LoadSpec) -> str | None:
        if load.model == "open":
            return "ab has no fixed-rate (open model) mode; it can only keep N requests in flight"
        if load.duration_s is not None and not float(load.duration_s).is_integer():
            return f"ab's -t takes whole seconds, not {load.duration_s}"
        if request.method == "HEAD" and request.body is not None:
            return "ab cannot send a body with HEAD"
        if request.mix:
            return "ab sends one URL; a weighted request mix needs oha"
        return None

    def command(
        self, url: str, request: RequestSpec, load: LoadSpec, body_path: Path | None, workdir: Path
    ) -> list[str]:
        argv = [self.executable(), "-q", "-r"]
        if load.keepalive:
            argv.append("-k")
        argv += ["-c", str(load.concurrency)]
        # -t must come before -n: ab's -t resets the request count to 50000.
        if load.duration_s is not None:
            argv += ["-t", str(int(load.duration_s))]
            requests = load.requests or math.ceil(load.duration_s * AB_RATE_CEILING)
            argv += ["-n", str(requests)]
        else:
            argv += ["-n", str(load.requests)]
        argv += ["-s", str(max(1, math.ceil(load.timeout_s)))]
        if body_path is not None:
            if request.method == "PUT":
                argv += ["-u", str(body_path)]
            else:
                argv += ["-p", str(body_path)]
                if request.method != "POST":
                    argv += ["-m", request.method]
            argv += ["-T", request.content_type]
        elif request.method == "HEAD":
            argv.append("-i")
        elif request.method != "GET":
            argv += ["-m", request.method]
        for header, value in request.headers.items():
            argv += ["-H", f"{header}: {value}"]
        argv.append(url)
        return argv

    def parse(self, stdout: str, stderr: str, load: LoadSpec) -> LoadMeasurement:
        complete = _int(stdout, r"Complete requests:\s+(\d+)")
        non_2xx = _int(stdout, r"Non-2xx responses:\s+(\d+)", default=0)
        failures = re.search(
            r"\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)", stdout
        )
        connect, receive, _length, exceptions = (
            (int(g) for g in failures.groups()) if failures else (0, 0, 0, 0)
        )
        write = _int(stdout, r"Write errors:\s+(\d+)", default=0)
        errors = {
            "connect": connect,
            "read": receive,
            "write": write,
            "other": max(0, exceptions - receive),
        }
        errors = {kind: n for kind, n in errors.items() if n}
        ok = max(0, complete - non_2xx - receive - write)
        status_counts = {code: n for code, n in (("2xx", ok), ("non-2xx", non_2xx)) if n}
        latency = _latencies(stdout) if complete else dict.fromkeys(LATENCY_KEYS, 0.0)
        return LoadMeasurement(
            driver=self.name,
            requests_total=complete + connect + errors.get("other", 0),
            duration_s=_float(stdout, r"Time taken for tests:\s+" + _NUMBER),
            rps=_float(stdout, r"Requests per second:\s+" + _NUMBER),
            latency_mean_ms=latency["mean"],
            latency_p50_ms=latency["p50"],
            latency_p90_ms=latency["p90"],
            latency_p99_ms=latency["p99"],
            latency_max_ms=latency["max"],
            status_counts=status_counts,
            connection_errors=errors,
            bytes_received=_int(stdout, r"Total transferred:\s+(\d+) bytes"),
        )


def _latencies(stdout: str) -> dict[str, float]:
    """Mean from the Connection Times "Total" row, the rest from the percentage table.

    ab prints the table only for two requests or more; with one, the Total
    row (min, mean, sd, median, max) says it all.
    """
    row = re.search(r"^Total:((?:\s+" + _NUMBER + r")+)\s*$", stdout, re.MULTILINE)
    if row is None:
        raise ValueError("no 'Total:' row in ab's Connection Times")
    columns = [float(x) for x in row.group(1).split()]
    # Five columns (min, mean, sd, median, max); three (min, mean, max) with ab -S.
    mean, longest = columns[1], columns[-1]
    median = columns[3] if len(columns) == 5 else mean
    table = {
        int(p): float(ms)
        for p, ms in re.findall(r"^\s*(\d+)%\s+" + _NUMBER, stdout, flags=re.MULTILINE)
    }
    return {
        "mean": mean,
        "p50": table.get(50, median),
        "p90": table.get(90, longest),
        "p99": table.get(99, longest),
        "max": table.get(100, longest),
    }


def _int(text: str, pattern: str, default: int | None = None) -> int:
    match = re.search(pattern, text)
    if match is None:
        if default is None:
            raise ValueError(f"ab's output has no match for {pattern!r}")
        return default
    return int(match.group(1))


def _float(text: str, pattern: str) -> float:
    match = re.search(pattern, text)
    if match is None:
        raise ValueError(f"ab's output has no match for {pattern!r}")
    return float(match.group(1))
