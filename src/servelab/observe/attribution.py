"""Why requests failed: the proxy's and the app server's log lines, classified.

A load driver only sees "502"; the cause is in nginx's error log (which
upstream call failed, and how) and in gunicorn's log (workers timing out,
recycled or killed). While a run goes, servelab remembers where each log
ended (:class:`LogCursor`), and afterwards classifies every line written since
(:func:`classify_line`); the counts per class go with the run's result.

Classes, most specific first (see ``EVENT_CLASSES`` for causes and fixes):

- nginx ``connect() ... failed (11: Resource temporarily unavailable)``
  → ``backlog_overflow`` (the app's unix-socket listen queue was full);
- nginx ``upstream timed out ... while connecting`` → ``connect_timeout``
  (over TCP a full listen queue drops the handshake); ``upstream timed out``
  otherwise → ``read_timeout``;
- nginx ``upstream prematurely closed`` → ``upstream_closed``; ``reset by
  peer`` / ``Broken pipe`` → ``upstream_reset``: a keepalive race (the app
  closed an idle connection nginx was reusing) or a killed or recycled worker;
- nginx ``Connection refused`` / ``No such file`` → ``upstream_refused``;
- gunicorn ``WORKER TIMEOUT`` → ``worker_timeout``; ``was sent SIGKILL`` /
  other signals → ``worker_killed``; ``exited with code`` → ``worker_crash``;
  ``Autorestarting worker`` / uvicorn ``Maximum request limit`` →
  ``worker_recycle``; ``Worker exiting`` / ``Child process died`` →
  ``worker_exit``; ``Booting worker`` →
  ``worker_boot``; ``Error handling request`` / ``Exception in ASGI
  application`` → ``app_error``, or ``aborted_request`` when its traceback
  goes through gunicorn's ``handle_abort`` (gunicorn 27 answers 500 for a
  request its worker timeout cut);
- Apache (its error log, source ``apache``): mod_proxy's ``attempt to connect
  ... failed`` (AH00957 over TCP, AH02454 over a unix socket) by its errno:
  ``(11)`` → ``backlog_overflow``, ``(70007)The timeout specified has
  expired`` / ``(110)`` → ``connect_timeout``, ``(111)`` / ``(2)`` →
  ``upstream_refused``; ``error reading status line`` (AH01102): ``(70007)``
  → ``read_timeout``, ``(104)`` → ``upstream_reset``, otherwise (the app
  closed the connection) → ``upstream_closed``; ``pass request body failed``
  (AH01097) → ``upstream_reset``; ``server reached MaxRequestWorkers`` →
  ``front_busy`` (not a failure). Each failed request also logs a second line
  (AH01114 / AH01079 / AH10101 ``failed to make connection to backend``,
  AH00898 ``Error reading from remote server``): not counted again. mod_wsgi:
  ``Timeout when reading response headers from daemon process`` →
  ``read_timeout``, ``Error reading response headers from daemon process
  (Connection reset by peer)`` → ``upstream_reset`` (other reasons, and
  ``Truncated or oversized response headers``: ``upstream_closed``),
  ``exception raised processing WSGI script`` → ``app_error``; what the app
  writes to stderr (``[wsgi:error]`` lines without a WSGI code) is not an
  event. Apache's statuses differ from nginx's: a failed connect is 503, a
  backend read timeout 502 (mod_wsgi's: 504);
- any other line at warning level or above → ``other``. Informational lines
  (start-up banners) and traceback continuation lines are not counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from servelab.plugins.front import get_front
from servelab.plugins.server import get_server
from servelab.registry import PROCESS_FRONTS, SERVER_KINDS

# The front's access log in the stack's directory (nginx's ``access_log`` knob): one
# client address a line, counted per run (servelab.observe.observer).
ACCESS_LOG_NAME = "access.log"


@dataclass(frozen=True)
class EventClass:
    key: str
    label: str
    cause: str
    fix: str
    failure: bool  # True when each line stands for a failed or broken request


EVENT_CLASSES: tuple[EventClass, ...] = (
    EventClass(
        "backlog_overflow",
        "backlog overflow (502)",
        "nginx could not connect to the app: the unix socket's listen queue, "
        "min(app backlog, net.core.somaxconn), was full (EAGAIN) and nginx answered 502",
        "raise net.core.somaxconn and the app's backlog together, add workers, "
        "or shed load before the queue fills",
        True,
    ),
    EventClass(
        "connect_timeout",
        "connect timeout (504)",
        "nginx's connect to the app timed out; over TCP a full listen queue drops the "
        "handshake instead of refusing it, so overload shows as 504",
        "raise somaxconn and the app's backlog, add workers, or lower proxy_connect_timeout "
        "to fail fast",
        True,
    ),
    EventClass(
        "read_timeout",
        "response timeout (504)",
        "the app took longer than nginx's proxy_read_timeout to answer (often: the request "
        "waited in the listen queue behind slow ones)",
        "add workers or threads, make the slow path faster, or raise proxy_read_timeout",
        True,
    ),
    EventClass(
        "upstream_closed",
        "upstream closed early (502)",
        "the app closed the connection before answering: a keepalive race (the app closed "
        "an idle connection nginx was just reusing) or a worker killed or recycled mid-request",
        "make the app's keepalive timeout longer than nginx's upstream keepalive_timeout; "
        "check worker timeouts and max_requests",
        True,
    ),
    EventClass(
        "upstream_reset",
        "upstream reset (502)",
        "the app reset the connection: same causes as an early close (keepalive race, "
        "killed or recycled worker)",
        "make the app's keepalive timeout longer than nginx's upstream keepalive_timeout; "
        "check worker timeouts and max_requests",
        True,
    ),
    EventClass(
        "upstream_refused",
        "upstream not listening (502)",
        "nothing accepted connections at the app's address (app down or restarting)",
        "check that the app server runs and listens where nginx points",
        True,
    ),
    EventClass(
        "proxy_limit",
        "proxy out of connections or files",
        "nginx ran out of worker_connections or file descriptors",
        "raise worker_connections and the open-file limit (ulimit -n)",
        True,
    ),
    EventClass(
        "aborted_request",
        "request cut by a worker timeout (500)",
        "gunicorn aborted the worker mid-request (its traceback goes through handle_abort) "
        "and the request was answered 500",
        "raise gunicorn's timeout above the slowest request, or use a non-blocking worker",
        True,
    ),
    # Process-level events: the requests they break show as the lines above.
    EventClass(
        "front_busy",
        "Apache at MaxRequestWorkers",
        "every Apache worker (thread, or process under prefork) was busy: new connections "
        "waited in Apache's listen queue, which adds latency but fails no request by itself",
        "raise max_request_workers (with threads_per_child), or add app workers so requests "
        "finish sooner",
        False,
    ),
    EventClass(
        "worker_timeout",
        "worker timeout",
        "gunicorn's master aborted a worker that was silent longer than its timeout; the "
        "request it was serving fails (500 from the aborting worker, or 502 if it was killed)",
        "raise gunicorn's timeout above the slowest request, or use a non-blocking worker",
        False,
    ),
    EventClass(
        "worker_killed",
        "worker killed by a signal",
        "a worker died from a signal (SIGKILL often means the kernel's OOM killer)",
        "check memory limits and the kernel log",
        False,
    ),
    EventClass(
        "worker_crash",
        "worker exited with an error",
        "a worker exited with a non-zero code (after a timeout, or a crash)",
        "see the app server's log around the line",
        False,
    ),
    EventClass(
        "app_error",
        "app error",
        "the app raised an exception while handling a request",
        "see the traceback in the app server's log",
        True,
    ),
    EventClass(
        "worker_recycle",
        "worker recycled (max_requests)",
        "a worker reached max_requests and restarts after its current request",
        "add max_requests_jitter so workers do not restart together, or raise max_requests",
        False,
    ),
    EventClass(
        "worker_exit",
        "worker exit",
        "a worker process exited (recycled, timed out or stopping)",
        "",
        False,
    ),
    EventClass(
        "worker_boot",
        "worker boot",
        "a worker process started (replacing one that exited)",
        "",
        False,
    ),
    EventClass(
        "other",
        "other warning or error",
        "a log line at warning level or above that servelab does not classify",
        "read the line in the log",
        False,
    ),
)
EVENT_BY_KEY = {event.key: event for event in EVENT_CLASSES}

# (pattern on an app server's message, class), first match wins.
_APP_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"WORKER TIMEOUT"), "worker_timeout"),
    (re.compile(r"Worker \(pid:\d+\) was sent SIG(?!TERM)"), "worker_killed"),
    (re.compile(r"Worker \(pid:\d+\) exited with code"), "worker_crash"),
    (re.compile(r"Autorestarting worker|Maximum request limit"), "worker_recycle"),
    (re.compile(r"Worker exiting|Child process \[?\d+\]? died"), "worker_exit"),
    (re.compile(r"Booting worker with pid"), "worker_boot"),
    (re.compile(r"Error handling request|Exception in ASGI application"), "app_error"),
)
SERIOUS_LEVELS = {"warn", "warning", "error", "crit", "critical", "alert", "emerg"}


Rules = tuple[tuple[re.Pattern[str], str], ...]


def classify_line(line: str, source: str) -> str | None:
    """The event class of one log line from ``source`` (a front's role, or "app" for
    the app server), or None for lines that are not events (banners, tracebacks' inner
    lines). Each front classifies its own log; app lines match any registered server's
    line format."""
    line = line.rstrip("\n")
    if source in PROCESS_FRONTS:
        return get_front(source).classify_log_line(line)
    for pattern in app_line_formats():
        match = pattern.match(line)
        if match is not None:
            return classify_by_rules(match, _APP_RULES)
    return None


def classify_by_rules(match: re.Match[str], rules: Rules) -> str | None:
    """The class of the first rule matching the line's message (its ``msg`` group); else
    "other" at warning level or above (its ``level`` group), else None."""
    message = match["msg"]
    for pattern, key in rules:
        if pattern.search(message):
            return key
    return "other" if match["level"].lower() in SERIOUS_LEVELS else None


def app_line_formats() -> list[re.Pattern[str]]:
    """The log line formats of the registered app servers (a role "app" log is any)."""
    found = (get_server(kind).log_line for kind in SERVER_KINDS)
    return [pattern for pattern in found if pattern is not None]


@dataclass
class LogEvents:
    """Counts per event class, and the first line seen of each."""

    counts: dict[str, int]
    examples: dict[str, str]

    @classmethod
    def empty(cls) -> LogEvents:
        return cls({}, {})

    def add(self, key: str, line: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1
        self.examples.setdefault(key, line.rstrip("\n"))

    def merge(self, other: LogEvents) -> None:
        for key, n in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n
        for key, line in other.examples.items():
            self.examples.setdefault(key, line)


def classify_lines(lines: Iterable[str], source: str) -> LogEvents:
    """Classify every line; an ``app_error`` whose traceback (the unformatted lines after
    it) goes through gunicorn's ``handle_abort`` is an ``aborted_request`` instead."""
    events = LogEvents.empty()
    pending: str | None = None  # an app_error line whose traceback is being read
    aborted = False
    for line in lines:
        key = classify_line(line, source)
        formatted = key is not None or _is_log_line(line, source)
        if pending is not None and formatted:
            events.add("aborted_request" if aborted else "app_error", pending)
            pending = None
        if pending is not None:
            aborted = aborted or "in handle_abort" in line
            continue
        if key == "app_error":
            pending, aborted = line, False
        elif key is not None:
            events.add(key, line)
    if pending is not None:
        events.add("aborted_request" if aborted else "app_error", pending)
    return events


def _is_log_line(line: str, source: str) -> bool:
    if source in PROCESS_FRONTS:
        return get_front(source).is_log_line(line)
    return any(pattern.match(line) is not None for pattern in app_line_formats())


def source_of(role: str) -> str:
    """The log format of a stack process role (a front's role, else "app")."""
    return role if role in PROCESS_FRONTS else "app"


class LogCursor:
    """Remembers where each log file ended, to classify only what is written after."""

    def __init__(self, logs: Mapping[str, Path]) -> None:
        """``logs``: role ("nginx", "app") -> log file."""
        self.logs = dict(logs)
        self.offsets = {role: _size(path) for role, path in self.logs.items()}

    def read_new(self) -> dict[str, list[str]]:
        """Whole lines written to each log since the cursor was made (or last read)."""
        new: dict[str, list[str]] = {}
        for role, path in self.logs.items():
            start = self.offsets[role]
            try:
                with open(path, "rb") as handle:
                    handle.seek(start)
                    data = handle.read()
            except OSError:
                new[role] = []
                continue
            end = data.rfind(b"\n") + 1  # a half-written last line waits for next time
            self.offsets[role] = start + end
            new[role] = data[:end].decode(errors="replace").splitlines()
        return new

    def events(self) -> LogEvents:
        """Classify every new line of every log."""
        events = LogEvents.empty()
        for role, lines in self.read_new().items():
            events.merge(classify_lines(lines, source_of(role)))
        return events


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def failure_events(counts: Mapping[str, int]) -> int:
    """How many counted lines stand for failed or broken requests."""
    return sum(n for key, n in counts.items() if key in EVENT_BY_KEY and EVENT_BY_KEY[key].failure)


def describe_counts(counts: Mapping[str, int]) -> str:
    """'backlog_overflow x67, worker_boot x1' in the order of EVENT_CLASSES; '-' if none."""
    order = [e.key for e in EVENT_CLASSES]
    keys = sorted(counts, key=lambda k: order.index(k) if k in order else len(order))
    parts = [f"{key} x{counts[key]}" for key in keys if counts[key]]
    return ", ".join(parts) or "-"
