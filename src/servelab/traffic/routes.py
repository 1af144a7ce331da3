"""Paths grouped into routes: the ids in them collapsed, so that ``/items/123`` and
``/items/456`` count as one route, ``/items/{id}``, the way the app's own URL table
names them.

A segment is an id when it is a number (``{id}``), a UUID (``{uuid}``) or a long token
(``{token}``: 16 or more hex digits, such as a hash, or 20 or more characters of letters
and digits mixed, such as a base64 key or a slug with a number). Words and short
segments such as ``v2``, ``en-gb`` or ``deadbeef`` stay as they are: they name a
route, not a row. The query string never belongs to a route.

A file name with a build's fingerprint in it (``app.3f2a9c.css``, ``main.1291.js``,
``chunk-4b1c.js``: a name, then a part of four or more hex digits with a digit) is one file
of many of its kind: such files collapse into one route per directory and extension,
``/static/{asset}.css``. Routes the heuristics miss are named by templates
(``--route-template /users/{name}/profile``): ``{...}`` stands for one segment, ``*``
for anything; the first template that matches names the route.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from servelab.errors import SpecError

ID = "{id}"
UUID = "{uuid}"
TOKEN = "{token}"
ASSET = "{asset}"

_NUMBER = re.compile(r"\d+")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_HEX = re.compile(r"[0-9a-f]{16,}", re.I)
# base64 (standard and URL-safe, padding included), and the dashes of slugs.
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-+=~]{20,}")
_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[A-Za-z]")
# A file name's extension, kept after an id: /photos/123.jpg -> /photos/{id}.jpg.
_EXTENSION = re.compile(r"(.+?)(\.[A-Za-z][A-Za-z0-9]{0,4})")
# A fingerprinted file: name parts split at . - _, one of 4+ hex digits with a digit in it.
_FILE = re.compile(r"(.+)(\.[A-Za-z][A-Za-z0-9]{0,4})")
_PARTS = re.compile(r"[._-]")
_FINGERPRINT = re.compile(r"(?=[0-9a-f]*\d)[0-9a-f]{4,}", re.I)
_TEMPLATE_PART = re.compile(r"\{[^{}/]*\}|\*")


@dataclass(frozen=True)
class RouteTemplate:
    """A route named by the user: paths that match ``pattern`` are ``text``'s."""

    text: str
    pattern: re.Pattern[str]


def route_template(text: str) -> RouteTemplate:
    """``/users/{name}/profile`` or ``/docs/*`` as a template; SpecError if it is no path."""
    text = text.strip()
    if not text.startswith("/"):
        raise SpecError(f"--route-template {text!r} is not a path",
                        "write it as the paths are, from /: /users/{name}/profile, /docs/*")
    parts = []
    end = 0
    for match in _TEMPLATE_PART.finditer(text):
        parts.append(re.escape(text[end : match.start()]))
        parts.append(".*" if match[0] == "*" else "[^/]+")
        end = match.end()
    parts.append(re.escape(text[end:]))
    return RouteTemplate(text, re.compile("".join(parts)))


def fingerprinted(segment: str) -> str | None:
    """``{asset}.css`` for ``app.3f2a9c.css``; None for a name with no fingerprint."""
    file = _FILE.fullmatch(segment)
    if file is None:
        return None
    parts = _PARTS.split(file[1])
    if len(parts) > 1 and any(_FINGERPRINT.fullmatch(part) for part in parts):
        return ASSET + file[2]
    return None


def segment_id(segment: str) -> str | None:
    """The placeholder that stands for ``segment`` if it is an id, else None."""
    if _NUMBER.fullmatch(segment):
        return ID
    if _UUID.fullmatch(segment):
        return UUID
    if _HEX.fullmatch(segment):
        return TOKEN
    if (
        _TOKEN_CHARS.fullmatch(segment)
        and _DIGIT.search(segment)
        and _LETTER.search(segment)
    ):
        return TOKEN
    return None


def route_segment(segment: str) -> str:
    """``segment`` as a route names it: an id's placeholder (its file extension kept),
    else the segment itself."""
    found = segment_id(segment)
    if found is not None:
        return found
    extension = _EXTENSION.fullmatch(segment)
    if extension is not None:
        found = segment_id(extension.group(1))
        if found is not None:
            return found + extension.group(2)
    return segment


def route_of(path: str, templates: Sequence[RouteTemplate] = ()) -> str:
    """The route of a request's path (its query string, if any, dropped):
    ``/api/v2/users/550e8400-e29b-41d4-a716-446655440000/`` ->
    ``/api/v2/users/{uuid}/``; the first of ``templates`` that matches names it. An
    absolute URL (a proxy's request line) counts by its path; ``*`` (``OPTIONS *``) stays
    itself."""
    path = path.partition("?")[0].partition("#")[0]
    if "://" in path:
        path = "/" + path.partition("://")[2].partition("/")[2]
    if not path:
        return "/"
    for template in templates:
        if template.pattern.fullmatch(path):
            return template.text
    segments = path.split("/")
    name = segments[-1]
    last = fingerprinted(name) if name and route_segment(name) == name else None
    if last is not None:  # a fingerprint, and no id (a UUID's file stays {uuid}.json)
        return "/".join([*(route_segment(s) if s else "" for s in segments[:-1]), last])
    return "/".join(route_segment(segment) if segment else "" for segment in segments)
