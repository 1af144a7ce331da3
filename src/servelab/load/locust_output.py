"""Locust's output, read: its ``--json`` statistics and the lines servelab's hooks
(``locustfiles/servelab_hooks.py``) print after them, into servelab's figures and
one-line errors (the driver that runs Locust: ``locust.py``).


- requests/s, counts and latencies come from Locust's ``--json`` statistics (per
  request name, with their response-time histograms). Locust keeps response times
  rounded (whole ms under 100 ms, 10 ms under 1 s, then 100 ms): percentiles are
  computed from those histograms, so they are as coarse as Locust's own; the mean and
  max are exact. A sliced run merges the slices' histograms (``latencies_ms``), the
  equivalent of oha's per-request latencies at Locust's resolution.
- Locust times failed requests too; they are counted in its latencies.
- failures by message: an HTTP status in the message (``status 502, expected 200``,
  FastHttpUser's ``code=502``, requests' ``502 Server Error``) counts under that
  status; the rest are connection errors sorted into ``ERROR_KINDS`` by substring
  ("timeout", "connect", "reset", else "other"). Successful requests count as
  ``2xx/3xx`` (Locust does not tell the codes of successes apart).
- ``bytes_received``: Locust's content lengths (bodies only).
- CSV output (``--csv``) is not used: Locust rewrites it once a second while running
  and does not write the final state at exit, so it lags the ``--json`` figures.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servelab.errors import SpecError
from servelab.plugins.driver import kind_of
from servelab.results.records import NamedRequests, percentile

HOOKS = "servelab_hooks.py"
REPORT_MARKER = '{"servelab_locust"'
WAITING_MARKER = '{"servelab_waiting"'
CPU_BOUND_PCT = 90.0  # of a core: Locust's own warning threshold

# Failure message substrings (lower case) -> kind; checked in this order.
ERROR_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("timeout", ("timeout", "timed out")),
    (
        "connect",
        ("refused", "unreachable", "no route", "name or service", "newconnectionerror",
         "failed to establish", "gaierror", "errno 111"),
    ),
    (
        "reset",
        ("reset", "remotedisconnected", "connection aborted", "broken pipe",
         "badstatusline", "incomplete", "connectionclosed", "chunkedencodingerror",
         "protocolerror", "connection closed"),
    ),
)
_STATUS_PATTERNS = (
    re.compile(r"\bstatus (\d{3})\b"),  # servelab's built-in scenarios
    re.compile(r"\bcode=(\d{3})\b"),  # FastHttpUser: LocustBadStatusCode(code=502)
    re.compile(r"\b(\d{3}) (?:Client|Server) Error\b"),  # HttpUser: raise_for_status
)


def error_kind(message: str) -> str:
    """The short kind ("timeout", "connect", "reset", "other") of a failure message."""
    return kind_of(message, ERROR_KINDS)


def failure_key(message: str) -> tuple[str, str]:
    """("status", "502") for a failure that got an HTTP answer, else ("connection", kind)."""
    for pattern in _STATUS_PATTERNS:
        match = pattern.search(message)
        if match:
            return "status", match.group(1)
    return "connection", error_kind(message)


def cpu_bound_machines(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The worker machines of a run whose busiest Locust process used 90 % of a core or
    more (Locust's own threshold), or that Locust warned about."""
    return [
        m for m in report.get("worker_machines") or []
        if m.get("cpu_warning") or float(m.get("cpu_max", 0)) >= CPU_BOUND_PCT
    ]


def waiting_machines(stderr: str) -> dict[str, int] | None:
    """Machine -> worker processes connected, as the master's last ``servelab_waiting``
    line (the hooks') said while it waited for workers; None without one."""
    return marked_machines(stderr, WAITING_MARKER)


def marked_machines(stderr: str, marker: str) -> dict[str, int] | None:
    """Machine -> worker processes, from the master's last stderr line starting with
    ``marker`` (the hooks' ``{"servelab_waiting": {...}}`` or ``servelab_started``);
    None without one."""
    lines = [line for line in stderr.splitlines() if line.startswith(marker)]
    with contextlib.suppress(ValueError, KeyError, IndexError, AttributeError):
        (machines,) = json.loads(lines[-1]).values()
        return {str(m): int(n) for m, n in machines.items()}
    return None


def split_output(stdout: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Locust's ``--json`` statistics (a list per request name) and the hooks' line."""
    lines = stdout.splitlines()
    marked = [i for i, line in enumerate(lines) if line.startswith(REPORT_MARKER)]
    if not marked:
        raise ValueError(f"no {REPORT_MARKER}...}} line from {HOOKS}")
    report = json.loads(lines[marked[-1]])["servelab_locust"]
    # With --processes each worker prints its own (emptied) statistics too: "[]".
    text, decoder, arrays, at = "\n".join(lines[: marked[-1]]), json.JSONDecoder(), [], 0
    while (at := text.find("[", at)) >= 0:
        value, at = decoder.raw_decode(text, at)
        arrays.append(value)
    if not arrays:
        raise ValueError("no statistics from Locust's --json")
    return next((a for a in reversed(arrays) if a), []), report


def check_scenario_ran(
    report: Mapping[str, Any], entries: list[dict[str, Any]], label: str
) -> None:
    """SpecError when the scenario could not send load: its code raised and no request
    was made, or every request failed. (No request and nothing raised is a stack that
    answered none in time: a measurement of zero, as with any driver.)"""
    requests = sum(int(e["num_requests"]) for e in entries)
    failed = sum(int(e["num_failures"]) for e in entries)
    exceptions = report.get("exceptions") or []
    if requests == 0 and exceptions:
        raise SpecError(
            f"{label} sent no request; it raised {exceptions[0]['msg'].strip()}",
            "check that its User classes have @task methods that send requests",
        )
    if requests and failed == requests:
        worst = max(report["errors"], key=lambda e: int(e["occurrences"]), default=None)
        first = f" ({worst['method']} {worst['name']}: {worst['error']})" if worst else ""
        raise SpecError(
            f"every one of the {requests} requests of {label} failed{first}",
            "check its paths, methods and expected answers against the app (--host is "
            "the stack's address)",
        )


def run_window(total: Mapping[str, Any], entries: list[dict[str, Any]]) -> float:
    """Seconds from the test's start to its last request (Locust's own requests/s window)."""
    start = total.get("start_time") or min((float(e["start_time"]) for e in entries), default=0)
    last = total.get("last_request_timestamp") or max(
        (float(e["last_request_timestamp"] or 0) for e in entries), default=0
    )
    return max(0.0, float(last) - float(start))


def merged_histogram(entries: list[dict[str, Any]]) -> dict[float, int]:
    """Response time (ms, as Locust rounds it) -> requests, over every request name."""
    times: dict[float, int] = {}
    for entry in entries:
        for ms, n in entry["response_times"].items():
            times[float(ms)] = times.get(float(ms), 0) + int(n)
    return times


def expand(times: Mapping[float, int]) -> list[float]:
    """A histogram as the sorted list of its values."""
    return [ms for ms in sorted(times) for _ in range(times[ms])]


def named_rows(
    entries: list[dict[str, Any]], failures: list[dict[str, Any]], duration: float
) -> tuple[NamedRequests, ...]:
    """One row per request name (and method): Locust's per-name statistics."""
    rows = []
    for entry in sorted(entries, key=lambda e: (e["name"], e["method"] or "")):
        ordered = expand({float(k): int(n) for k, n in entry["response_times"].items()})
        kinds: dict[str, int] = {}
        for failure in failures:
            if failure["name"] == entry["name"] and failure["method"] == entry["method"]:
                key = failure_key(str(failure["error"]))[1]
                kinds[key] = kinds.get(key, 0) + int(failure["occurrences"])
        n = int(entry["num_requests"])
        rows.append(
            NamedRequests(
                method=entry["method"] or "",
                name=entry["name"],
                requests=n,
                failures=int(entry["num_failures"]),
                rps=n / duration if duration > 0 else 0.0,
                latency_mean_ms=float(entry["total_response_time"]) / n if n else 0.0,
                latency_p50_ms=percentile(ordered, 50),
                latency_p99_ms=percentile(ordered, 99),
                latency_max_ms=float(entry["max_response_time"] or 0),
                failures_by_kind=kinds,
            )
        )
    return tuple(rows)


def import_error(text: str, path: str) -> str:
    """The last line of a traceback, with the locustfile's line that raised."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    message = lines[-1].strip() if lines else "unknown error"
    frames = re.findall(r'File "([^"]+)", line (\d+)', text)
    own = [line for file, line in frames if Path(file).name == Path(path).name]
    return f"{message} (line {own[-1]})" if own else message


def workers_text(workers: int, machines: Mapping[str, int]) -> str:
    """``workers`` processes on other machines, by machine, in words: "2 on other machines
    (load-b: 2 processes)"."""
    listed = ", ".join(
        f"{m}: {n} process{'es' if n > 1 else ''}" for m, n in machines.items()
    )
    return f"{workers} on other machines" + (f" ({listed})" if listed else "")
