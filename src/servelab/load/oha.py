"""oha, the default load driver: closed and open model, JSON output, per-code counts.

Flags are read from the installed oha's ``--help`` once per binary, so both
current oha (``--output-format json``, 1.x) and old oha (``-j``) work.

How the load maps onto oha:

- closed model: ``-c concurrency`` connections, each sending its next request
  as soon as the previous one is answered;
- open model: ``-q rate --latency-correction``. oha schedules requests at the
  fixed rate and measures each latency from its *scheduled* start, so that a
  slow server is not hidden by requests that were never sent (coordinated
  omission). ``-c concurrency`` caps the connections serving that schedule;
  if they are all busy, requests queue and their queueing time is counted;
- bound: ``-n requests``, or ``-z duration`` with ``-w`` (requests in flight at
  the deadline are waited for instead of aborted). oha refuses ``-n`` together
  with ``-z``; a load that gives both runs for the duration, as with wrk.

Compression: oha asks for gzip/br by default; ab and wrk ask for nothing. To
send the same request whichever the driver, oha runs with
``--disable-compression``; a workload that wants compressed answers says so
with an ``Accept-Encoding`` header in its request (which then goes to every
driver alike).

Connection errors: oha reports failures by message ("Connection refused (os
error 111)", "timeout", "connection error"...). ``error_kind`` sorts them into
four kinds by substring, first match wins (see ``ERROR_KINDS``):
"timeout", "connect" (no connection was made), "reset" (the connection was
made, then closed or reset before the answer) and "other". oha's "aborted due
to deadline" entries are requests cut by ``-z`` without ``-w``; they are not
failures of the server and are left out of every figure.

Figures: latencies cover requests that got an HTTP answer (oha keeps none
for failed ones) and are 0 when no request was answered. ``bytes_received``
is oha's ``totalData``: response bodies only, without headers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

from servelab.config.load import LoadSpec, RequestSpec
from servelab.errors import LoadDriverError
from servelab.host.doctor import SETUP_FIX, Check, check_program
from servelab.host.paths import cache_dir, require_program
from servelab.plugins.driver import Answer, LoadDriver, kind_of, program_output
from servelab.results.records import LoadMeasurement

# Failure message substrings (lower case) -> kind; checked in this order.
ERROR_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("timeout", ("timeout", "timed out")),
    (
        "connect",
        (
            "refused",
            "unreachable",
            "no route",
            "dns",
            "no record",
            "failed to lookup",
            "resolve",
            "os error 111",
        ),
    ),
    (
        "reset",
        (
            "reset",
            "connection error",
            "closed before message completed",
            "broken pipe",
            "incomplete",
            "error reading",
            "error writing",
        ),
    ),
)
DEADLINE_MESSAGE = "aborted due to deadline"
REQUESTS_DB = "requests.sqlite"


def error_kind(message: str) -> str:
    """The short kind ("timeout", "connect", "reset", "other") of an oha failure message."""
    return kind_of(message, ERROR_KINDS)


def duration_arg(seconds: float) -> str:
    """A duration oha (humantime) reads: whole seconds as "5s", else milliseconds."""
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{max(1, round(seconds * 1000))}ms"


class OhaFlags:
    """The flags this oha binary understands, read from its ``--help``."""

    def __init__(self, help_text: str) -> None:
        self.json = ["--output-format", "json"] if "--output-format" in help_text else ["-j"]
        self.no_tui = ["--no-tui"] if "--no-tui" in help_text else []
        self.no_compression = (
            ["--disable-compression"] if "--disable-compression" in help_text else []
        )
        self.wait_at_deadline = (
            ["-w"] if "--wait-ongoing-requests-after-deadline" in help_text else []
        )


@functools.lru_cache(maxsize=4)
def _flags_of(program: str) -> OhaFlags:
    return OhaFlags(program_output([program, "--help"], "oha --help", "oha"))


class OhaDriver(LoadDriver):
    name = "oha"
    capabilities = frozenset(
        {"request_count", "open_model", "bursts", "slow_ms", "request_mix", "latencies"}
    )

    def __init__(
        self,
        program: str | None = None,
        help_text: str | None = None,
        *,
        keep_latencies: bool = False,
    ) -> None:
        """``program`` / ``help_text`` pin the binary and its flags (tests, odd installs).
        ``keep_latencies``: every run keeps each request's latency (``latencies_ms``), for
        runs measured in slices whose percentiles are merged (servelab.measuring.slices)."""
        self._program = program
        self._flags = OhaFlags(help_text) if help_text is not None else None
        self.keep_latencies = keep_latencies

    def executable(self) -> str:
        if self._program is not None:
            return self._program
        return require_program(
            "oha",
            f"run `servelab setup`, or `cargo install oha --locked --root {cache_dir() / 'cargo'}`",
        )

    def flags(self) -> OhaFlags:
        if self._flags is None:
            self._flags = _flags_of(self.executable())
        return self._flags

    def doctor_checks(self) -> list[Check]:
        fix = f"{SETUP_FIX} (builds oha with cargo into the servelab cache)"
        return [check_program("oha", ["oha", "--version"], required=True, fix=fix)]

    def version(self) -> str:
        text = program_output([self.executable(), "--version"], "oha --version", "oha").strip()
        first = text.splitlines()[0] if text else "unknown"
        return first.removeprefix("oha ").strip()

    def command(
        self, url: str, request: RequestSpec, load: LoadSpec, body_path: Path | None, workdir: Path
    ) -> list[str]:
        flags = self.flags()
        argv = [
            self.executable(),
            *flags.no_tui,
            *flags.json,
            *flags.no_compression,
            "-c",
            str(load.concurrency),
        ]
        if load.duration_s is not None:
            argv += ["-z", duration_arg(load.duration_s), *flags.wait_at_deadline]
        else:
            argv += ["-n", str(load.requests)]
        if load.model == "open":
            argv += ["-q", repr(float(load.rate or 0)), "--latency-correction"]
        elif load.model == "bursts":
            # oha sleeps burst-delay, sends burst-rate requests, and again.
            argv += [
                "--burst-delay", duration_arg(load.burst_gap_s or 1.0),
                "--burst-rate", str(load.burst_size),
            ]
        if load.slow_ms is not None or self.keep_latencies:
            # oha appends to an existing database; each run counts its own requests.
            (workdir / REQUESTS_DB).unlink(missing_ok=True)
            argv += ["--db-url", str(workdir / REQUESTS_DB)]
        if not load.keepalive:
            argv.append("--disable-keepalive")
        argv += ["-t", duration_arg(load.timeout_s), "-m", request.method]
        for header, value in request.headers.items():
            argv += ["-H", f"{header}: {value}"]
        if body_path is not None:
            argv += ["-T", request.content_type, "-D", str(body_path)]
        if request.mix:
            argv += ["--urls-from-file", str(write_url_mix(url, request, workdir))]
        else:
            argv.append(url)
        return argv

    def extra_measurements(self, workdir: Path, load: LoadSpec) -> dict[str, Any]:
        """The count of slow requests, from the per-request database oha wrote."""
        if load.slow_ms is None:
            return {}
        return {"slow_requests": count_slow_requests(workdir / REQUESTS_DB, load.slow_ms)}

    def parse(self, stdout: str, stderr: str, load: LoadSpec) -> LoadMeasurement:
        data = json.loads(stdout)
        summary = data["summary"]
        status_counts = {str(code): int(n) for code, n in data["statusCodeDistribution"].items()}
        errors: dict[str, int] = {}
        for message, n in data.get("errorDistribution", {}).items():
            if DEADLINE_MESSAGE in message.lower():
                continue
            kind = error_kind(message)
            errors[kind] = errors.get(kind, 0) + int(n)
        total = sum(status_counts.values()) + sum(errors.values())
        duration = float(summary["total"])
        percentiles = data["latencyPercentiles"]
        return LoadMeasurement(
            driver=self.name,
            requests_total=total,
            duration_s=duration,
            rps=total / duration if duration > 0 else 0.0,
            latency_mean_ms=_ms(summary.get("average")),
            latency_p50_ms=_ms(percentiles.get("p50")),
            latency_p90_ms=_ms(percentiles.get("p90")),
            latency_p99_ms=_ms(percentiles.get("p99")),
            latency_max_ms=_ms(summary.get("slowest")),
            status_counts=status_counts,
            connection_errors=errors,
            bytes_received=int(summary.get("totalData") or 0),
        )


    def latencies_ms(self, workdir: Path) -> list[float]:
        """Every answered request's latency of the last run (needs ``keep_latencies``)."""
        rows = _query(workdir / REQUESTS_DB, "SELECT duration * 1000.0 FROM oha")
        return [float(row[0]) for row in rows]

    switchable = True  # SIGSTOP pauses its tokio runtime; its database keeps each answer

    def answers(self, workdir: Path) -> list[Answer]:
        """Every answered request of the last run (its ``--db-url`` database): oha's
        ``start`` is a request's real send time, ``end`` when its answer was read."""
        rows = _query(
            workdir / REQUESTS_DB, 'SELECT start, "end", status, len_bytes FROM oha ORDER BY "end"'
        )
        return [Answer(float(a), float(b), int(c), int(d)) for a, b, c, d in rows]

    def send_rate(self, workdir: Path) -> float:
        """The rate at which the last run's answered requests actually went out (needs
        ``keep_latencies``): oha's ``start`` is a request's real send time, its scheduled
        one being ``start_latency_correction``. 0 for fewer than two requests."""
        [(count, first, last)] = _query(
            workdir / REQUESTS_DB, "SELECT COUNT(*), MIN(start), MAX(start) FROM oha"
        )
        if count < 2 or last <= first:
            return 0.0
        return (count - 1) / (last - first)


def count_slow_requests(db: Path, slow_ms: float) -> int:
    """Answered requests slower than ``slow_ms`` in oha's ``--db-url`` database.

    oha's ``duration`` column runs from the request's intended start (when
    latency correction is on) to its end, like the latencies it reports.
    """
    rows = _query(db, "SELECT COUNT(*) FROM oha WHERE duration * 1000.0 > ?", (slow_ms,))
    return int(rows[0][0])


def _query(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` on oha's per-request database (written with ``--db-url``)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            return conn.execute(sql, params).fetchall()
    except sqlite3.Error as exc:
        raise LoadDriverError(
            f"could not read oha's request database {db} ({exc})",
            "check that this oha supports --db-url (servelab doctor)",
        ) from None


def _ms(seconds: Any) -> float:
    """oha's seconds as milliseconds; its null (no answered request) as 0."""
    if seconds is None:
        return 0.0
    value = float(seconds)
    return 0.0 if math.isnan(value) else value * 1000.0


def write_url_mix(url: str, request: RequestSpec, workdir: Path) -> Path:
    """The file of URLs oha draws each request's from: each path ``weight`` times
    (weights divided by their gcd), so a uniform draw follows the weights."""
    base = url.removesuffix(request.path)
    divisor = math.gcd(*(m.weight for m in request.mix))
    path = workdir / "urls.txt"
    path.write_text("".join(f"{base}{m.path}\n" * (m.weight // divisor) for m in request.mix))
    return path
