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
from servelab.traffic.apache_format import is_apache_format, nginx_equivalent
from servelab.traffic.json_lines import KnownJsonLayouts, json_hint, json_lines_format
from servelab.traffic.nginx_format import (
    COMBINED_LOG_FORMAT,
    COMMON_LOG_FORMAT,
    NginxFormat,
    compile_nginx_format,
    format_text,
)
from servelab.traffic.records import LogRecord
from servelab.traffic.server_config import is_reference, named_format
from servelab.traffic.split_lines import SplitReader

DEFAULT_LOG_FORMAT = "auto"
LOG_FORMAT_NAMES = ("auto", "combined", "common", "json")
LOG_FORMAT_FIX = (
    "name the log's format: --log-format auto, combined, common or json (JSON lines with "
    "other keys: --log-format json --log-field time=KEY --log-field path=KEY), the format "
    "your server writes it with (nginx's log_format or Apache's LogFormat): --log-format "
    "'<its format string>', or its name in the server's configuration: --log-format "
    "/etc/nginx/nginx.conf:main"
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


def format_hint(parser: LineParser, line: str) -> str | None:
    """What would read ``line`` when ``parser`` cannot (a JSON line's keys and the
    --log-field flags for them), if the parser can tell."""
    hint = getattr(parser, "hint", None)
    return hint(line) if hint is not None else None


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
    own (nginx's stock ``main`` format is combined plus ``"$http_x_forwarded_for"``). A
    line that starts with ``{`` is JSON, in one of the layouts ``json_lines`` knows."""

    choices: tuple[NginxFormat, ...] = (
        compile_nginx_format(COMBINED_LOG_FORMAT, name="combined", trailing=True),
        compile_nginx_format(COMMON_LOG_FORMAT, name="common", trailing=True),
    )
    name: str = "auto (combined, common or JSON lines)"
    split: SplitReader = field(
        default_factory=lambda: SplitReader(combined=True, common=True, trailing=True)
    )
    json: KnownJsonLayouts = field(default_factory=KnownJsonLayouts)

    def parse(self, line: str, source: str = "", number: int = 0) -> LogRecord | None:
        record = self.split.record(line, source, number)
        if record is not None:
            return record
        if line.startswith("{"):
            return self.json.parse(line, source, number)
        for choice in self.choices:
            record = choice.parse(line, source, number)
            if record is not None:
                return record
        return None

    def hint(self, line: str) -> str | None:
        return json_hint(line)


def log_format(spec: str, fields: Mapping[str, str] | None = None) -> LineParser:
    """The parser ``spec`` names: ``auto``, ``combined``, ``common``, ``json`` (with
    ``fields`` mapping servelab's time, method, path and status to the JSON keys), an nginx
    ``log_format`` string (any text with a ``$variable``), an Apache ``LogFormat`` string
    (``%`` directives), or ``PATH:NAME``, the format of that name in a server's
    configuration file."""
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
    if name == "auto":
        return AutoFormat()
    if name == "combined":
        return COMBINED
    if name == "common":
        return COMMON
    if is_reference(text):
        named = named_format(text)
        return _format_string(named, f"{text} ({_cut(named)!r})")
    if "$" in text or is_apache_format(text):
        return _format_string(text)
    raise SpecError(f"unknown log format {text!r}", LOG_FORMAT_FIX)


def _format_string(text: str, name: str = "") -> LineParser:
    """An nginx ``log_format`` or an Apache ``LogFormat`` string's parser."""
    if is_apache_format(format_text(text)):
        return compile_nginx_format(
            nginx_equivalent(format_text(text)),
            name=name or f"the LogFormat {_cut(format_text(text))!r}",
        )
    return compile_nginx_format(text, name=name)


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
