"""wrk: a fast closed-model driver that runs for a fixed duration.

wrk has neither a request count nor a fixed rate, so loads bounded only by a
request count, and open-model loads, are refused; a load with both a count
and a duration runs for the duration. Its time options take whole seconds.

The request (method, body) is set and the results are printed by
``wrk_report.lua``, shipped next to this module: its ``done()`` writes one
JSON line with wrk's summary, error counters and latency in microseconds.

Reading wrk's counters:

- "requests" are answered requests; "status" counts those answered >= 400.
  wrk does not tell codes apart, so status_counts = {"2xx/3xx": requests -
  status, "4xx/5xx": status} (the classes keep ``LoadMeasurement``'s
  ok/error split right).
- "connect", "read" and "write" count socket failures (no answer); they are
  added to ``requests_total``.
- "timeout" counts requests slower than ``--timeout``, some of which may still
  have been answered later: it is reported as kind "timeout" but not added to
  ``requests_total``.

``bytes_received`` is wrk's byte count: headers and bodies.
"""

from __future__ import annotations

import json
import math
import os
from importlib import resources
from pathlib import Path
from typing import ClassVar

from servelab.config.load import LoadSpec, RequestSpec
from servelab.errors import LoadDriverError
from servelab.host.doctor import Check, check_program
from servelab.host.paths import require_program
from servelab.plugins.driver import LoadDriver, program_output
from servelab.results.records import LoadMeasurement

SCRIPT_NAME = "wrk_report.lua"
REPORT_MARKER = '{"servelab_wrk"'
US_PER_MS = 1000.0
US_PER_S = 1_000_000.0


def usable_cpus() -> int:
    """How many CPUs this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


INSTALL_FIX = "apt-get install wrk (needed only for --driver wrk)"


class WrkDriver(LoadDriver):
    name = "wrk"
    capabilities: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, program: str | None = None, cpus: int | None = None) -> None:
        """``program`` pins the binary; ``cpus`` the CPU count that caps wrk's threads."""
        self._program = program
        self._cpus = cpus

    def executable(self) -> str:
        if self._program is not None:
            return self._program
        return require_program("wrk", INSTALL_FIX)

    def doctor_checks(self) -> list[Check]:
        return [check_program("wrk", ["wrk", "--version"], required=False, fix=INSTALL_FIX)]

    def version(self) -> str:
        # "wrk 4.2.0 [epoll] Copyright (C) 2012 Will Glozer" (exits 1 after printing it).
        words = program_output([self.executable(), "-v"], "wrk -v", "wrk").split()
        return words[1] if len(words) > 1 and words[0] == "wrk" else "unknown"

    def unsupported(self, request: RequestSpec, load: LoadSpec) -> str | None:
        if load.model == "open":
            return "wrk has no fixed-rate (open model) mode"
        if request.mix:
            return "wrk sends one URL; a weighted request mix needs oha"
        if load.duration_s is None:
            return "wrk runs for a duration and cannot stop after a request count; set duration_s"
        if not float(load.duration_s).is_integer():
            return f"wrk's -d takes whole seconds, not {load.duration_s}"
        return None

    def threads(self, load: LoadSpec) -> int:
        """One thread per usable CPU, never more threads than connections."""
        return max(1, min(load.concurrency, self._cpus or usable_cpus()))

    def command(
        self, url: str, request: RequestSpec, load: LoadSpec, body_path: Path | None, workdir: Path
    ) -> list[str]:
        if load.duration_s is None:
            raise LoadDriverError(
                "wrk needs a duration", "set duration_s in the load (wrk has no request count)"
            )
        argv = [
            self.executable(),
            "-t",
            str(self.threads(load)),
            "-c",
            str(load.concurrency),
            "-d",
            f"{int(load.duration_s)}s",
            "--latency",
            "--timeout",
            f"{max(1, math.ceil(load.timeout_s))}s",
        ]
        headers = dict(request.headers)
        if not load.keepalive:
            headers["Connection"] = "close"
        if body_path is not None and not any(h.lower() == "content-type" for h in headers):
            headers["Content-Type"] = request.content_type
        for header, value in headers.items():
            argv += ["-H", f"{header}: {value}"]
        argv += ["-s", str(script_path(workdir)), url, "--", request.method]
        if body_path is not None:
            argv.append(str(body_path))
        return argv

    def parse(self, stdout: str, stderr: str, load: LoadSpec) -> LoadMeasurement:
        lines = [line for line in stdout.splitlines() if line.startswith(REPORT_MARKER)]
        if not lines:
            raise ValueError(f"no {REPORT_MARKER}...}} line from {SCRIPT_NAME}")
        report = json.loads(lines[-1])
        requests = int(report["requests"])
        errors = {kind: int(report["errors"][kind]) for kind in ("connect", "read", "write")}
        errors["timeout"] = int(report["errors"]["timeout"])
        errors = {kind: n for kind, n in errors.items() if n}
        status_errors = int(report["errors"]["status"])
        status_counts = {
            code: n
            for code, n in (("2xx/3xx", requests - status_errors), ("4xx/5xx", status_errors))
            if n
        }
        duration = int(report["duration_us"]) / US_PER_S
        latency = report["latency_us"]
        return LoadMeasurement(
            driver=self.name,
            requests_total=requests + sum(n for k, n in errors.items() if k != "timeout"),
            duration_s=duration,
            rps=requests / duration if duration > 0 else 0.0,
            latency_mean_ms=float(latency["mean"]) / US_PER_MS,
            latency_p50_ms=float(latency["p50"]) / US_PER_MS,
            latency_p90_ms=float(latency["p90"]) / US_PER_MS,
            latency_p99_ms=float(latency["p99"]) / US_PER_MS,
            latency_max_ms=float(latency["max"]) / US_PER_MS,
            status_counts=status_counts,
            connection_errors=errors,
            bytes_received=int(report["bytes"]),
        )


def script_path(workdir: Path) -> Path:
    """The report script as a file wrk can open (copied into ``workdir`` if zipped)."""
    resource = resources.files("servelab.load").joinpath(SCRIPT_NAME)
    if isinstance(resource, Path) and resource.is_file():
        return resource
    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / SCRIPT_NAME
    target.write_text(resource.read_text())
    return target
