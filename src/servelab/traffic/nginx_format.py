"""An nginx ``log_format`` string compiled into one regular expression, and the combined
and common formats written as such strings.

The user gives the format their nginx writes its access log with, so that any log reads
without servelab knowing its fields: each ``$variable`` is a capture, the text between
them is literal. servelab needs a time and a request from it; every other variable is
read past."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from servelab.errors import SpecError
from servelab.traffic.log_values import (
    TIME_LOCAL_SHAPE,
    epoch_from_iso8601,
    epoch_from_number,
    epoch_from_text,
    epoch_from_time_local,
    method_of,
    origin_target,
    request_from_line,
    status_of,
)
from servelab.traffic.records import LogRecord

# nginx's own combined format, with Apache's ident (%l) where nginx writes a literal "-".
COMMON_LOG_FORMAT = (
    '$remote_addr $remote_ident $remote_user [$time_local] "$request" $status $body_bytes_sent'
)
COMBINED_LOG_FORMAT = COMMON_LOG_FORMAT + ' "$http_referer" "$http_user_agent"'

def _epoch_from_microseconds(text: str) -> float | None:
    """Apache's ``%{usec}t``: microseconds since the epoch."""
    return epoch_from_number(int(text) / 1e6) if text.isascii() and text.isdigit() else None


def _epoch_from_milliseconds(text: str) -> float | None:
    """Apache's ``%{msec}t``: milliseconds since the epoch."""
    return epoch_from_number(int(text) / 1e3) if text.isascii() and text.isdigit() else None


# Where a log's time is, most precise first (apache_*: Apache's %{sec}t, %{msec}t, ...).
_TIME_READERS: Mapping[str, Callable[[str], float | None]] = {
    "msec": epoch_from_text,
    "apache_usec": _epoch_from_microseconds,
    "apache_msec": _epoch_from_milliseconds,
    "time_iso8601": epoch_from_iso8601,
    "apache_sec": epoch_from_text,
    "time_local": epoch_from_time_local,
}
TIME_VARIABLES = tuple(_TIME_READERS)
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
# Variables nginx writes without spaces: the last field of a format, if one of these,
# stops at a space rather than taking the rest of the line.
_TOKEN_VARIABLES = frozenset({
    "status", "body_bytes_sent", "bytes_sent", "request_length", "request_time", "msec",
    "connection", "connection_requests", "pid", "remote_addr", "remote_port", "server_port",
    "apache_time_us", "apache_time_ms", "apache_time_s", "apache_sec", "apache_msec",
    "apache_usec", "bytes_transferred",
})  # fmt: skip
# A time_local has a space of its own; Apache's %q is "" or "?..." (after %U, unspaced).
_SHAPES = {"time_local": TIME_LOCAL_SHAPE, "apache_query": r"(?:\?\S*)?"}
# Values with spaces, read up to the first place the rest of the line matches when the
# format writes them without quotes.
_SPACED_VARIABLES = frozenset({"request", "http_user_agent", "http_referer"})
_QUOTED = r'[^"\\]*(?:\\.[^"\\]*)*'  # inside "...": nginx writes " as \x22, Apache as \"
# log_format NAME [escape=...] '...' '...';  as pasted from nginx.conf
_CONFIG_LINE = re.compile(r"log_format\s+\S+\s+(?:escape=\S+\s+)?(.*?);?\s*", re.DOTALL)
_QUOTED_PIECES = re.compile(r"'[^']*'(?:\s+'[^']*')*")


@dataclass(frozen=True)
class NginxFormat:
    """Lines written by one nginx ``log_format``."""

    name: str
    pattern: re.Pattern[str]
    time_variable: str  # one of TIME_VARIABLES
    # ("request",), ("request_method", "request_uri") or ("request_method", "uri", ARGS?)
    request_variables: tuple[str, ...]
    # The pattern's group numbers, found once (0: the format has no $status).
    _time_group: int = field(init=False, repr=False, compare=False)
    _request_groups: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _status_group: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        groups = self.pattern.groupindex
        object.__setattr__(self, "_time_group", groups[_group(self.time_variable)])
        numbers = tuple(groups[_group(name)] for name in self.request_variables)
        object.__setattr__(self, "_request_groups", numbers)
        object.__setattr__(self, "_status_group", groups.get(_group("status"), 0))

    def parse(self, line: str, source: str = "", number: int = 0) -> LogRecord | None:
        match = self.pattern.fullmatch(line)
        if match is None:
            return None
        time = _TIME_READERS[self.time_variable](match[self._time_group])
        request = self._request(match)
        if time is None or request is None:
            return None
        status = status_of(match[self._status_group]) if self._status_group else None
        return LogRecord(time, request[0], request[1], status, source, number)

    def _request(self, match: re.Match[str]) -> tuple[str, str] | None:
        values = match.group(*self._request_groups) if len(self._request_groups) > 1 else None
        if values is None:
            return request_from_line(match[self._request_groups[0]])
        method = method_of(values[0])
        if len(values) == 2:
            target = origin_target(values[1])
        else:  # $uri, then $args when the format has it ("-": none)
            query = values[2] if len(values) == 3 and values[2] not in ("", "-") else ""
            if self.request_variables[-1] == "apache_query":  # Apache's %q: "?a=1" or ""
                query = query.removeprefix("?")
            target = origin_target(values[1] + ("?" + query if query else ""))
        return (method, target) if method is not None and target is not None else None


def _group(variable: str) -> str:
    """The capture group of a variable (nginx's names may start with a digit: ``$1``)."""
    return "v_" + variable


def format_text(spec: str) -> str:
    """The format string itself, also when pasted from nginx.conf: ``log_format main
    '$remote_addr ...' '"$request" ...';`` (nginx joins the quoted pieces)."""
    text = spec.strip()
    config = _CONFIG_LINE.fullmatch(text)
    if config is not None:
        text = config[1].strip()
    if _QUOTED_PIECES.fullmatch(text):
        text = "".join(re.findall(r"'([^']*)'", text))
    return text


def _tokens(text: str) -> list[tuple[bool, str]]:
    """The format as (is_variable, text) pieces, in order."""
    tokens: list[tuple[bool, str]] = []
    end = 0
    for match in _VARIABLE.finditer(text):
        if match.start() > end:
            tokens.append((False, text[end : match.start()]))
        tokens.append((True, match[1] or match[2]))
        end = match.end()
    if end < len(text):
        tokens.append((False, text[end:]))
    return tokens


def _capture(variable: str, before: tuple[bool, str] | None, after: tuple[bool, str] | None) -> str:
    """What a variable's value may be: up to the literal text that follows it."""
    if variable in _SHAPES:
        return _SHAPES[variable]
    if after is None:
        return r"\S*" if variable in _TOKEN_VARIABLES else ".*"
    is_variable, text = after
    if is_variable:
        return ".*?"
    if text[0] == '"' and before is not None and not before[0] and before[1].endswith('"'):
        return _QUOTED
    if variable in _SPACED_VARIABLES:
        return ".*?"
    return f"[^{re.escape(text[0])}]*"


def _request_variables(names: set[str]) -> tuple[str, ...] | None:
    """Where the request is: method and target apart if the format has them, else the line."""
    if {"request_method", "request_uri"} <= names:
        return ("request_method", "request_uri")
    if "request" in names:
        return ("request",)
    if {"request_method", "uri"} <= names:
        args = [name for name in ("args", "query_string", "apache_query") if name in names]
        return ("request_method", "uri", *args[:1])
    return None


def compile_nginx_format(spec: str, *, name: str = "", trailing: bool = False) -> NginxFormat:
    """The parser of lines written by ``spec``; ``trailing`` also reads lines with more
    fields after the format's (nginx's stock ``main`` is combined plus one)."""
    text = format_text(spec)
    tokens = _tokens(text)
    seen: set[str] = set()
    parts = []
    for index, (is_variable, value) in enumerate(tokens):
        if not is_variable:
            parts.append(re.escape(value))
            continue
        before = tokens[index - 1] if index > 0 else None
        after = tokens[index + 1] if index + 1 < len(tokens) else None
        capture = _capture(value, before, after)
        # A variable written twice is read once: a group name may appear only once.
        parts.append(f"(?:{capture})" if value in seen else f"(?P<{_group(value)}>{capture})")
        seen.add(value)
    time_variable = next((variable for variable in TIME_VARIABLES if variable in seen), None)
    request_variables = _request_variables(seen)
    lacking = []
    if time_variable is None:
        lacking.append("time ($time_local, $time_iso8601 or $msec)")
    if request_variables is None:
        lacking.append("request ($request, or $request_method with $request_uri or $uri)")
    if time_variable is None or request_variables is None:
        raise SpecError(
            f"the log format {_cut(text)!r} names no {' and no '.join(lacking)}",
            "give the log_format your nginx writes the access log with, as nginx.conf has "
            "it (nginx's combined format has $time_local and $request)",
        )
    tail = r"(?:\s.*)?" if trailing else ""
    return NginxFormat(
        name=name or f"the log format {_cut(text)!r}",
        pattern=re.compile("".join(parts) + tail, re.DOTALL),
        time_variable=time_variable,
        request_variables=request_variables,
    )


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
