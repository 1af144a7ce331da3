"""Paths grouped into routes: the ids in them collapsed, so that ``/items/123`` and
``/items/456`` count as one route, ``/items/{id}``, the way the app's own URL table
names them.

A segment is an id when it is a number (``{id}``), a UUID (``{uuid}``) or a long token
(``{token}``: 16 or more hex digits, such as a hash, or 20 or more characters of letters
and digits mixed, such as a base64 key or a slug with a number). Words and short
segments such as ``v2``, ``en-gb`` or ``deadbeef`` stay as they are: they name a
route, not a row. The query string never belongs to a route.
"""

from __future__ import annotations

import re

ID = "{id}"
UUID = "{uuid}"
TOKEN = "{token}"

_NUMBER = re.compile(r"\d+")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_HEX = re.compile(r"[0-9a-f]{16,}", re.I)
# base64 (standard and URL-safe, padding included), and the dashes of slugs.
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-+=~]{20,}")
_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[A-Za-z]")
# A file name's extension, kept after an id: /photos/123.jpg -> /photos/{id}.jpg.
_EXTENSION = re.compile(r"(.+?)(\.[A-Za-z][A-Za-z0-9]{0,4})")


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


def route_of(path: str) -> str:
    """The route of a request's path (its query string, if any, dropped):
    ``/api/v2/users/550e8400-e29b-41d4-a716-446655440000/`` ->
    ``/api/v2/users/{uuid}/``. An absolute URL (a proxy's request line) counts by its
    path; ``*`` (``OPTIONS *``) stays itself."""
    path = path.partition("?")[0].partition("#")[0]
    if "://" in path:
        path = "/" + path.partition("://")[2].partition("/")[2]
    if not path:
        return "/"
    return "/".join(route_segment(segment) if segment else "" for segment in path.split("/"))
