"""Access logs written as JSON lines (nginx ``escape=json``, Caddy, a framework's own
logger): one object a line, its keys named by the user.

Times are read as ISO 8601 or as epoch seconds or milliseconds (numbers or their text);
an ISO time without a zone is read as UTC. The path may hold a whole request line
(``GET /a HTTP/1.1``) in logs that keep no method of their own."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from servelab.errors import SpecError
from servelab.traffic.log_values import (
    epoch_from_number,
    epoch_from_text,
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
        if not line.startswith("{"):
            return None
        try:
            document = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested beyond the parser's depth
            return None
        if not isinstance(document, dict):
            return None
        time = _time(_value(document, self.time_key))
        request = _request(_value(document, self.method_key), _value(document, self.path_key))
        if time is None or request is None:
            return None
        status = status_of(_value(document, self.status_key))
        return LogRecord(time, request[0], request[1], status, source, number)


def json_lines_format(fields: Mapping[str, str]) -> JsonLinesFormat:
    """The JSON-lines parser with the user's keys (``{"time": "ts", ...}``) over the
    defaults; a field servelab does not know, or an empty key, is a SpecError."""
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
    if isinstance(value, str):
        return epoch_from_text(value)
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
