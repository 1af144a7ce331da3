"""Is the stack ready? Send the workload's real request through it until it answers.

A port that accepts connections proves little (nginx answers 502 while the app
still boots); the request the load driver will send, answered with the
expected status, proves the whole path works. Each attempt runs in a helper
thread so that a server dying meanwhile is noticed at once, even while an
attempt waits on a slow app (the sleepy app takes seconds per request).
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from servelab.config.load import RequestSpec
from servelab.errors import ServelabError, StackStartError
from servelab.host.netns import NetNamespace
from servelab.host.procs import ManagedProcess

POLL_S = 0.05  # how often processes are checked while an attempt runs
RETRY_S = 0.1  # pause between attempts
# A front answers these while the app behind it is not up yet: keep waiting. Any other
# wrong status given this many times in a row, over at least SETTLED_S, is the app's
# answer: say so at once rather than after the whole start-up timeout.
NOT_UP_YET = frozenset({502, 503, 504})
SETTLED_ANSWERS = 5
SETTLED_S = 1.0
LOG_LINES = 20
_FIRST_ERROR = re.compile(
    r"Traceback \(most recent call last\)|\[(ERROR|CRITICAL|emerg|alert|crit)\]"
)


def wait_ready(
    url: str,
    request: RequestSpec,
    processes: Mapping[str, ManagedProcess],
    timeout_s: float,
    *,
    netns: NetNamespace | None = None,
) -> None:
    """Return once ``request`` sent to ``url`` gets ``request.expect_status``.

    With ``netns``, every attempt's connection is made inside that namespace.

    Raises StackStartError naming the server when one of ``processes`` exits
    (its log tail as ``detail``), or when ``timeout_s`` passes (with the last
    status or connection error seen).
    """
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    started = time.monotonic()
    deadline = started + timeout_s
    last: int | str = "no attempt finished"
    answer: int | None = None  # the wrong status answered in a row, and since when
    same_answers, first_answer_at = 0, started
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        attempt = _Attempt(opener, _build_request(url, request), timeout_s=remaining, netns=netns)
        attempt.start()
        while attempt.is_alive() and time.monotonic() < deadline:
            _raise_if_exited(processes)
            attempt.join(POLL_S)
        _raise_if_exited(processes)
        if attempt.is_alive():
            if not isinstance(last, int):
                last = f"no answer within {timeout_s:.1f} s"
            break
        if attempt.status == request.expect_status:
            return
        # A wrong status says more than a later connection error (e.g. an attempt
        # cut short by the deadline), so it is kept.
        if attempt.status is not None or not isinstance(last, int):
            last = attempt.status if attempt.status is not None else attempt.error
        if attempt.status is not None and attempt.status not in NOT_UP_YET:
            if attempt.status != answer:
                answer, same_answers, first_answer_at = attempt.status, 0, time.monotonic()
            same_answers += 1
            settled = time.monotonic() - first_answer_at >= SETTLED_S
            if same_answers >= SETTLED_ANSWERS and settled:
                break  # the app's settled answer
        else:
            answer = None
        time.sleep(min(RETRY_S, max(0.0, deadline - time.monotonic())))
    _raise_timeout(
        f"the readiness request {request.method} {url}", processes,
        time.monotonic() - started, last, expected=request.expect_status,
    )


def wait_listening(
    address: tuple[str, int] | Path,
    processes: Mapping[str, ManagedProcess],
    timeout_s: float,
    *,
    netns: NetNamespace | None = None,
) -> None:
    """Return once a connection to ``address`` (host, port) or unix socket path succeeds
    (made inside ``netns`` when given).

    Used before starting nginx, so that nginx never tries an upstream that is
    not listening yet (which would log errors the run's log analysis would see).
    """
    deadline = time.monotonic() + timeout_s
    last = "no attempt"
    while time.monotonic() < deadline:
        _raise_if_exited(processes)
        wait = max(0.05, min(1.0, deadline - time.monotonic()))
        if netns is None:
            error = _try_connect(address, wait)
        else:
            error = netns.call(lambda: _try_connect(address, wait))  # noqa: B023
        if error is None:
            return
        last = error
        time.sleep(POLL_S)
    _raise_if_exited(processes)
    where = f"unix:{address}" if isinstance(address, Path) else "{}:{}".format(*address)
    _raise_timeout(f"connect to {where}", processes, timeout_s, last)


def _try_connect(address: tuple[str, int] | Path, timeout_s: float) -> str | None:
    """None if a connection to ``address`` succeeds, else what went wrong."""
    family = socket.AF_UNIX if isinstance(address, Path) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(address) if isinstance(address, Path) else address)
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
    return None


def _build_request(url: str, spec: RequestSpec) -> urllib.request.Request:
    data = spec.body.encode() if spec.body is not None else None
    headers = dict(spec.headers)
    if data is not None and not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = spec.content_type
    return urllib.request.Request(url, data=data, headers=headers, method=spec.method)


class _Attempt(threading.Thread):
    """One request; ``status`` is the HTTP status, else ``error`` says what went wrong."""

    def __init__(
        self,
        opener: urllib.request.OpenerDirector,
        req: urllib.request.Request,
        timeout_s: float,
        netns: NetNamespace | None = None,
    ) -> None:
        super().__init__(name="servelab-readiness", daemon=True)
        self.opener, self.req, self.timeout_s = opener, req, timeout_s
        self.netns = netns
        self.status: int | None = None
        self.error = ""

    def run(self) -> None:
        try:
            if self.netns is not None:
                # This thread only: the attempt's socket is made in the stack's namespace.
                self.netns.enter_current_thread()
            with self.opener.open(self.req, timeout=self.timeout_s) as response:
                response.read()
                self.status = response.status
        except urllib.error.HTTPError as exc:
            with exc:
                exc.read()
            self.status = exc.code
        except urllib.error.URLError as exc:
            self.error = f"connection failed ({exc.reason})"
        except (OSError, http.client.HTTPException) as exc:
            self.error = f"connection failed ({type(exc).__name__}: {exc})"
        except ServelabError as exc:  # could not enter the namespace
            self.error = exc.one_line()


def _raise_if_exited(processes: Mapping[str, ManagedProcess]) -> None:
    for proc in processes.values():
        code = proc.exit_code()
        if code is not None:
            log = log_excerpt(proc.log_tail(400))
            raise StackStartError(
                f"{proc.name} exited with code {code} before the stack was ready",
                _hint(log) or f"see {proc.name}'s log below ({proc.log_path})",
                detail=log,
            )


def _raise_timeout(
    what: str,
    processes: Mapping[str, ManagedProcess],
    timeout_s: float,
    last: int | str,
    expected: int | None = None,
) -> None:
    names = " and ".join(proc.name for proc in processes.values()) or "the stack"
    detail = "\n".join(
        f"--- {proc.name} log ({proc.log_path}) ---\n{log_excerpt(proc.log_tail(400)) or '(empty)'}"
        for proc in processes.values()
    )
    if isinstance(last, int):
        raise StackStartError(
            f"{names} answered {what} with HTTP {last}, "
            f"expected {expected} (waited {timeout_s:.1f} s)",
            "check the request's method, path, body and expected status, and the logs below",
            detail=detail,
        )
    raise StackStartError(
        f"{names} did not answer {what} within {timeout_s:.1f} s: {last}",
        _hint(detail) or "the app may be slow to start: raise the startup timeout, or see the logs",
        detail=detail,
    )


def log_excerpt(text: str, lines: int = LOG_LINES) -> str:
    """The last ``lines`` lines of a log, preceded by its first error if that is earlier.

    A server's first error is usually the cause (the app's exception in a
    worker) and its last lines the consequence (the master giving up), so a
    plain tail may show only the consequence.
    """
    all_lines = text.rstrip("\n").splitlines()
    tail = all_lines[-lines:]
    first = next((i for i, line in enumerate(all_lines) if _FIRST_ERROR.search(line)), None)
    if first is None or first >= len(all_lines) - lines:
        return "\n".join(tail)
    # The first error runs to the first unindented line after a traceback's frames.
    end = first + 1
    in_traceback = "Traceback" in all_lines[first]
    while end < len(all_lines) - lines:
        line = all_lines[end]
        if line.startswith("Traceback"):
            in_traceback = True
        elif in_traceback and line and not line[0].isspace():
            end += 1
            break
        elif not in_traceback:
            break
        end += 1
    block = all_lines[first:end]
    if len(block) > 12:
        block = [*block[:2], "  [...]", *block[-8:]]
    return "\n".join([*block, "[...]", *tail])


def _hint(log: str) -> str:
    """A fix for failures recognisable from a log tail ('' if none is)."""
    lowered = log.lower()
    if "address already in use" in lowered or "connection in use" in lowered:
        return "another program took the port between servelab choosing it and binding it; rerun"
    if "permission denied" in lowered:
        return "a server could not open a file or socket in the stack's temp dir; see the log"
    if "worker failed to boot" in lowered or "error loading asgi app" in lowered:
        return "the app fails to load inside the server; see the traceback below"
    return ""
