"""Combined and common lines read by splitting them at their quotes and spaces: the fast
path of ``formats``' combined, common and auto parsers.

A line is read here only when its shape leaves no doubt (no backslash, the quotes and
spaces where the format puts them, a time and a request line of the usual kind); then
the record is the one the format's regular expression gives, field for field. Anything
else (an escaped quote, a request line with two spaces, a target with bytes beyond
ASCII, garbage) is handed to the regular expression, which decides. Timestamps are read
once a second of log, not once a line: the parsed ones are kept, keyed by their text.
tests/unit/traffic/test_golden.py holds both to the same records, line for line."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from servelab.traffic.log_values import (
    TIME_LOCAL_SHAPE,
    epoch_from_time_local,
    method_of,
    status_of,
)
from servelab.traffic.records import LogRecord

T = TypeVar("T")
_TIME_SHAPE = re.compile(TIME_LOCAL_SHAPE)
# Versions the request-line pattern (HTTP/\d+(\.\d+)?) takes, read without it; others go
# to the regular expression.
_VERSIONS = frozenset({"HTTP/0.9", "HTTP/1.0", "HTTP/1.1", "HTTP/2", "HTTP/2.0", "HTTP/3",
                       "HTTP/3.0"})  # fmt: skip
CACHED = 4096  # distinct timestamps, methods or statuses kept (cleared when full)


class SplitReader:
    """Reads the lines of one of three shapes: ``combined``, ``common``, or with
    ``trailing``, either of them followed by more fields (auto)."""

    __slots__ = ("_methods", "_statuses", "_times", "combined", "common", "trailing")

    def __init__(self, *, combined: bool, common: bool, trailing: bool) -> None:
        self.combined = combined
        self.common = common
        self.trailing = trailing
        # What each text seen reads as (None: it does not read, the expression decides).
        self._times: dict[str, float | None] = {}
        self._methods: dict[str, str | None] = {}
        self._statuses: dict[str, int | None] = {}

    def record(self, line: str, source: str, number: int) -> LogRecord | None:
        """The line's record, or None when the regular expression must decide."""
        if "\\" in line:
            return None
        parts = line.split('"')
        count = len(parts)
        if count >= 7 and self.combined:
            if parts[4] != " ":
                return None
            # After the user agent: nothing, or (trailing) a space and more fields.
            if (count > 7 or parts[6]) and not (self.trailing and parts[6][:1].isspace()):
                return None
            middle = parts[2].split(" ")  # ' STATUS BYTES '
            if len(middle) != 4 or middle[0] or middle[3]:
                return None
        elif count == 3 and self.common:
            middle = parts[2].split(" ")  # ' STATUS BYTES' and, trailing, anything after
            if len(middle) < 3 or middle[0]:
                return None
            if not self.trailing and (len(middle) != 3 or not _token(middle[2])):
                return None
        else:
            return None
        head = parts[0].split(" ")  # ADDR IDENT USER [DAY/Mon/YEAR:CLOCK ZONE] ''
        if len(head) != 6 or head[5]:
            return None
        key = head[3] + " " + head[4]
        try:
            time = self._times[key]
        except KeyError:
            time = _learn(self._times, key, _time_of)
        request = parts[1].split(" ")
        if time is None or len(request) != 3 or request[2] not in _VERSIONS:
            return None
        try:
            method = self._methods[request[0]]
        except KeyError:
            method = _learn(self._methods, request[0], method_of)
        target = request[1]
        if method is None or target[:1] != "/" or not (target.isascii() and target.isprintable()):
            return None  # \S+ with less: printable ASCII (split at spaces already)
        try:
            status = self._statuses[middle[1]]
        except KeyError:
            status = _learn(self._statuses, middle[1], status_of)
        return LogRecord(time, method, target, status, source, number)


def _time_of(key: str) -> float | None:
    """``[06/May/2024:14:00:00 +0200]`` as epoch seconds, if the line's regular
    expression would take it as a time."""
    text = key[1:-1]
    if key[:1] != "[" or key[-1:] != "]" or not _TIME_SHAPE.fullmatch(text):
        return None
    return epoch_from_time_local(text)


def _learn(cache: dict[str, T], key: str, read: Callable[[str], T]) -> T:
    if len(cache) >= CACHED:
        cache.clear()
    value = cache[key] = read(key)
    return value


def _token(text: str) -> bool:
    """True for printable ASCII without spaces: what ``\\S`` takes, and less (the rest
    goes to the regular expression)."""
    return text.isascii() and text.isprintable() and " " not in text
