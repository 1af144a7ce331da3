"""The access-log formats servelab reads, each a line parser made by ``log_format``.

A parser returns a ``LogRecord`` for a line it can read and None for one it cannot (a
scanner's TLS handshake, a ``"-"`` request, a line of another format): the reader counts
those and refuses a log that has too many, so a wrong format is told rather than
replayed as a handful of requests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from servelab.errors import SpecError
from servelab.traffic.json_lines import json_lines_format
from servelab.traffic.nginx_format import (
    COMBINED_LOG_FORMAT,
    COMMON_LOG_FORMAT,
    NginxFormat,
    compile_nginx_format,
)
from servelab.traffic.records import LogRecord
from servelab.traffic.split_lines import SplitReader

DEFAULT_LOG_FORMAT = "auto"
LOG_FORMAT_NAMES = ("auto", "combined", "common", "json")
LOG_FORMAT_FIX = (
    "name the log's format: --log-format auto, combined, common or json (JSON lines with "
    "other keys: --log-format json --log-field time=KEY --log-field path=KEY), or the "
    "log_format your nginx writes it with: --log-format '<its format string>'"
)


class LineParser(Protocol):
    """Reads one line of an access log (without its newline)."""

    @property
    def name(self) -> str:
        """The format as the user knows it, for messages."""
        ...

    def parse(self, line: str, source: str = "", number: int = 0) -> LogRecord | None:
        """The request the line records, or None if the line cannot be read; ``source``
        and ``number`` say where the line is, kept in the record."""
        ...


@dataclass(frozen=True)
class SplitFirst:
    """Combined or common lines: split apart where their shape is plain, else (and to
    refuse a line) matched by the format's regular expression."""

    name: str
    expression: LineParser
    split: SplitReader

    def parse(self, line: str, source: str = "", number: int = 0) -> LogRecord | None:
        return self.split.record(line, source, number) or self.expression.parse(
            line, source, number
        )


COMBINED = SplitFirst(
    "combined", compile_nginx_format(COMBINED_LOG_FORMAT, name="combined"),
    SplitReader(combined=True, common=False, trailing=False),
)
COMMON = SplitFirst(
    "common", compile_nginx_format(COMMON_LOG_FORMAT, name="common"),
    SplitReader(combined=False, common=True, trailing=False),
)


@dataclass(frozen=True)
class AutoFormat:
    """Combined, else common, decided on each line; either may have more fields after its
    own (nginx's stock ``main`` format is combined plus ``"$http_x_forwarded_for"``)."""

    choices: tuple[NginxFormat, ...] = (
        compile_nginx_format(COMBINED_LOG_FORMAT, name="combined", trailing=True),
        compile_nginx_format(COMMON_LOG_FORMAT, name="common", trailing=True),
    )
    name: str = "auto (combined or common)"
    split: SplitReader = field(
        default_factory=lambda: SplitReader(combined=True, common=True, trailing=True)
    )

    def parse(self, line: str, source: str = "", number: int = 0) -> LogRecord | None:
        record = self.split.record(line, source, number)
        if record is not None:
            return record
        for choice in self.choices:
            record = choice.parse(line, source, number)
            if record is not None:
                return record
        return None


def log_format(spec: str, fields: Mapping[str, str] | None = None) -> LineParser:
    """The parser ``spec`` names: ``auto``, ``combined``, ``common``, ``json`` (with
    ``fields`` mapping servelab's time, method, path and status to the JSON keys), or an
    nginx ``log_format`` string (any text with a ``$variable``)."""
    text = spec.strip()
    name = text.lower()
    if fields and name != "json":
        raise SpecError(
            f"log fields are mapped ({', '.join(sorted(fields))}) but the log format is "
            f"{text!r}, not json",
            "add --log-format json, or leave out --log-field",
        )
    if name == "json":
        return json_lines_format(fields or {})
    if "$" in text:
        return compile_nginx_format(text)
    if name == "auto":
        return AutoFormat()
    if name == "combined":
        return COMBINED
    if name == "common":
        return COMMON
    raise SpecError(f"unknown log format {text!r}", LOG_FORMAT_FIX)
