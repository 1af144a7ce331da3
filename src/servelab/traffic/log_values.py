"""One value of an access-log line in a ``LogRecord``'s terms: a time (as nginx and Apache
write it, as ISO 8601, as epoch seconds or milliseconds) to epoch seconds UTC, a request
line to its method and target, a status.

Each returns None for a value it cannot read, rather than raising: access logs hold
scanners' garbage (TLS handshakes sent to the HTTP port, ``"-"`` requests), and such a
line is counted unreadable by the reader, not a reason to stop."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from functools import lru_cache

_MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
        start=1,
    )
}
# nginx's $time_local and Apache's %t: 10/Oct/2000:13:55:36 -0700 (a fraction and a colon
# in the offset are taken too, as Apache's custom %{...}t formats can write them).
TIME_LOCAL_SHAPE = r"\d{1,2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2}(?:\.\d+)? [+-]\d{2}:?\d{2}"
_TIME_LOCAL = re.compile(
    r"(\d{1,2})/([A-Za-z]{3})/(\d{4}):(\d{2}):(\d{2}):(\d{2})(\.\d+)? ([+-])(\d{2}):?(\d{2})"
)
# A method is an HTTP token; the target has no space; HTTP/0.9 lines have no version.
_METHOD = re.compile(r"[A-Za-z][A-Za-z_-]*")
_REQUEST_LINE = re.compile(r"([A-Za-z][A-Za-z_-]*) +(\S+)(?: +HTTP/\d+(?:\.\d+)?)?")
# Epoch numbers above this are milliseconds: 1e11 s is in the year 5138, 1e11 ms in 1973.
MILLISECONDS_ABOVE = 1e11


@lru_cache(maxsize=512)  # a busy log repeats each second's text on many lines
def epoch_from_time_local(text: str) -> float | None:
    """``10/Oct/2000:13:55:36 -0700`` -> epoch seconds UTC (the month's name in English,
    whatever the machine's locale, as nginx and Apache write it)."""
    match = _TIME_LOCAL.fullmatch(text)
    if match is None:
        return None
    day, month_name, year, hour, minute, second, fraction, sign, zone_h, zone_m = match.groups()
    month = _MONTHS.get(month_name.title())
    if month is None:
        return None
    try:
        moment = datetime(
            int(year), month, int(day), int(hour), int(minute), int(second), tzinfo=UTC
        )
    except ValueError:  # 31/Feb, 25:00:00
        return None
    offset = (int(zone_h) * 3600 + int(zone_m) * 60) * (1 if sign == "+" else -1)
    return moment.timestamp() - offset + (float(fraction) if fraction else 0.0)


@lru_cache(maxsize=512)
def epoch_from_iso8601(text: str) -> float | None:
    """``2024-05-01T12:00:00+02:00`` (or ``Z``) -> epoch seconds. A time without a zone is
    read as UTC: a log that writes none is most often written by a server on UTC."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def epoch_from_number(value: float) -> float | None:
    """Epoch seconds, or milliseconds when above ``MILLISECONDS_ABOVE``."""
    if not math.isfinite(value) or value < 0:
        return None
    return value / 1000.0 if value > MILLISECONDS_ABOVE else value


def epoch_from_text(text: str) -> float | None:
    """A time written as an epoch number (nginx's $msec) or as ISO 8601."""
    try:
        number = float(text)
    except ValueError:
        return epoch_from_iso8601(text)
    return epoch_from_number(number)


def method_of(text: str) -> str | None:
    """The method upper-cased (``get`` and ``GET`` are one method to replay)."""
    return text.upper() if _METHOD.fullmatch(text) else None


def origin_target(raw: str) -> str | None:
    """The target as replayed to a server: a path with its query. An absolute URI (a
    proxy's request, ``http://host/p?q``) loses its scheme and host; anything else that
    does not start with ``/`` (``*``, ``host:443`` of a CONNECT, garbage) is unreadable."""
    if raw.startswith("/"):
        return raw
    scheme, separator, rest = raw.partition("://")
    if not separator or scheme.lower() not in ("http", "https"):
        return None
    cuts = [index for index in (rest.find("/"), rest.find("?")) if index >= 0]
    if not cuts:
        return "/"
    cut = min(cuts)
    if cut == 0:  # no host
        return None
    tail = rest[cut:]
    return tail if tail.startswith("/") else "/" + tail


def request_from_line(text: str) -> tuple[str, str] | None:
    """``GET /a?b=1 HTTP/1.1`` -> ``("GET", "/a?b=1")``; ``-`` and garbage -> None."""
    match = _REQUEST_LINE.fullmatch(text)
    if match is None:
        return None
    target = origin_target(match[2])
    return (match[1].upper(), target) if target is not None else None


def status_of(value: object) -> int | None:
    """A status as an int, from a number or its text; None where the log has none (``-``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 100 <= value <= 999 else None
    if isinstance(value, str) and len(value) == 3 and value.isascii() and value.isdigit():
        return int(value) if value[0] != "0" else None
    return None
