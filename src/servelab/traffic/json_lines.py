"""Access logs written as JSON lines (nginx ``escape=json``, Caddy, Traefik, a framework's
own logger): one object a line, its keys those of a layout servelab knows (``LAYOUTS``)
or named by the user (``--log-field``).

Times are read as ISO 8601, as nginx's ``$time_local`` or as epoch seconds or
milliseconds (numbers or their text); an ISO time without a zone is read as UTC. The path
may hold a whole request line (``GET /a HTTP/1.1``) in logs that keep no method of their
own."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from servelab.errors import SpecError
from servelab.traffic.log_values import (
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

# servelab's names of a request's fields, each read from the key of the same name unless
# the user maps it to another (``request.method`` reaches into nested objects).
JSON_FIELDS = ("time", "method", "path", "status")
FIELD_ALIASES = {"target": "path"}  # the LogRecord's name of it
JSON_FIELD_FIX = (
    "map servelab's fields time, method, path (or target) and status to your log's keys, "
    "e.g. --log-format json --log-field time=ts --log-field path=request.uri"
)


@dataclass(frozen=True)
class JsonLinesFormat:
    """Lines each holding one JSON object with a request's time, method, path and status."""

    time_key: str = "time"
    method_key: str = "method"
    path_key: str = "path"
    status_key: str = "status"

    @property
    def name(self) -> str:
        mapped = [
            f"{field}={key}"
            for field, key in zip(JSON_FIELDS, self._keys(), strict=True)
            if field != key
        ]
        return f"json ({', '.join(mapped)})" if mapped else "json"

    def _keys(self) -> tuple[str, str, str, str]:
        return (self.time_key, self.method_key, self.path_key, self.status_key)

    def parse(self, line: str, source: str = "", number: int = 0) -> LogRecord | None:
        document = _document(line)
        return None if document is None else self.read(document, source, number)

    def read(self, document: dict[str, object], source: str, number: int) -> LogRecord | None:
        """The record of one line's object, or None if this layout does not read it."""
        time = _time(_value(document, self.time_key))
        method = _value(document, self.method_key) if self.method_key else None
        request = _request(method, _value(document, self.path_key))
        if time is None or request is None:
            return None
        status = status_of(_value(document, self.status_key))
        return LogRecord(time, request[0], request[1], status, source, number)

    def hint(self, line: str) -> str | None:
        return json_hint(line)


# Layouts read without --log-field: servelab's own keys; nginx's escape=json formats
# with the combined format's variables as keys (time_local, request, status, ... or
# request_method and request_uri); Caddy's access log (ts, request.method,
# request.uri, status); Traefik's JSON access log (StartUTC, RequestMethod, RequestPath,
# DownstreamStatus).
LAYOUTS: tuple[tuple[str, JsonLinesFormat], ...] = (
    ("servelab", JsonLinesFormat()),
    *(
        (f"nginx ({time})", JsonLinesFormat(time, method, path, "status"))
        for time in ("time_local", "time_iso8601", "msec")
        for method, path in (("", "request"), ("request_method", "request_uri"))
    ),
    ("Caddy", JsonLinesFormat("ts", "request.method", "request.uri", "status")),
    ("Traefik", JsonLinesFormat("StartUTC", "RequestMethod", "RequestPath",
                                "DownstreamStatus")),
)  # fmt: skip


@dataclass(frozen=True)
class KnownJsonLayouts:
    """JSON lines in any layout of ``LAYOUTS``, found line by line (the last one found
    tried first: a log keeps its layout)."""

    name: str = "json (servelab's keys, nginx escape=json, Caddy or Traefik)"
    _last: list[JsonLinesFormat] = field(default_factory=lambda: [LAYOUTS[0][1]])

    def parse(self, line: str, source: str = "", number: int = 0) -> LogRecord | None:
        document = _document(line)
        if document is None:
            return None
        record = self._last[0].read(document, source, number)
        if record is not None:
            return record
        for _, layout in LAYOUTS:
            record = layout.read(document, source, number)
            if record is not None:
                self._last[0] = layout
                return record
        return None

    def hint(self, line: str) -> str | None:
        return json_hint(line)


def json_hint(line: str) -> str | None:
    """For a JSON line no layout reads: its keys, and the --log-field flags that would
    read it (the keys whose names say time, method, path and status)."""
    document = _document(line)
    if document is None:
        return None
    keys = list(_keys(document))
    guesses = {field: next((k for k in keys if _looks_like(field, k)), None)
               for field in JSON_FIELDS}  # fmt: skip
    flags = " ".join(f"--log-field {field}={key}" for field, key in guesses.items() if key)
    shown = ", ".join(keys[:20]) + (", ..." if len(keys) > 20 else "")
    return (
        f"its lines are JSON with the keys {shown}: name the keys of the request's time "
        f"and path (and method and status), e.g. --log-format json {flags}".rstrip()
    )


_NAMES = {
    "time": ("time", "ts", "timestamp", "@timestamp", "date", "start", "when"),
    "method": ("method", "verb"),
    "path": ("uri", "path", "url", "request", "target"),
    "status": ("status", "code", "status_code"),
}


def _looks_like(field: str, key: str) -> bool:
    last = key.rpartition(".")[2].lower()
    return any(last == name or last.endswith(("_" + name, name)) for name in _NAMES[field])


def _keys(document: dict[str, object], prefix: str = "") -> Iterator[str]:
    """The object's keys, nested ones dotted (``request.uri``), depth first."""
    for key, value in document.items():
        if isinstance(value, dict) and prefix.count(".") < 2:
            yield from _keys(value, f"{prefix}{key}.")
        else:
            yield prefix + key


def _document(line: str) -> dict[str, object] | None:
    if not line.startswith("{"):
        return None
    try:
        document = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested beyond the parser's depth
        return None
    return document if isinstance(document, dict) else None


def json_lines_format(fields: Mapping[str, str]) -> JsonLinesFormat | KnownJsonLayouts:
    """The JSON-lines parser with the user's keys (``{"time": "ts", ...}``) over the
    defaults, or without any, the one that knows the common layouts; a field servelab
    does not know, or an empty key, is a SpecError."""
    if not fields:
        return KnownJsonLayouts()
    if len({FIELD_ALIASES.get(field, field) for field in fields}) < len(fields):
        raise SpecError("the log field path is mapped twice (target is path)", JSON_FIELD_FIX)
    fields = {FIELD_ALIASES.get(field, field): key for field, key in fields.items()}
    unknown = sorted(set(fields) - set(JSON_FIELDS))
    if unknown:
        raise SpecError(f"unknown log field {unknown[0]!r}", JSON_FIELD_FIX)
    empty = [field for field, key in fields.items() if not key.strip()]
    if empty:
        raise SpecError(f"the log field {empty[0]!r} is mapped to no key", JSON_FIELD_FIX)
    return JsonLinesFormat(**{f"{field}_key": key.strip() for field, key in fields.items()})


def _value(document: dict[str, object], key: str) -> object:
    """The value under ``key``: the key itself if the object has it (keys may hold dots),
    else the path of its dotted parts through nested objects; None if absent."""
    if key in document:
        return document[key]
    value: object = document
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _time(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return epoch_from_number(float(value))
        except OverflowError:  # an int of hundreds of digits
            return None
    if isinstance(value, str):  # no float and no ISO time has a "/", no float a ":"
        if "/" in value:
            return epoch_from_time_local(value)  # nginx's $time_local
        return epoch_from_iso8601(value) if ":" in value else epoch_from_text(value)
    return None


def _request(method: object, path: object) -> tuple[str, str] | None:
    if not isinstance(path, str):
        return None
    if method is None:  # no method of its own: the path may be the whole request line
        return request_from_line(path)
    if not isinstance(method, str):
        return None
    read_method, target = method_of(method), origin_target(path)
    return (read_method, target) if read_method is not None and target is not None else None
