"""A log format named in the web server's own configuration: ``nginx.conf:main`` is the
``log_format main ...;`` in that file (its quoted pieces joined, over as many lines as it
takes), ``apache2.conf:combined`` the ``LogFormat "..." combined`` line."""

from __future__ import annotations

import re
from pathlib import Path

from servelab.errors import SpecError

# PATH:NAME, where PATH names a file: no $, % or spaces (those are format strings).
_REFERENCE = re.compile(r"([^\s$%]+):([\w.-]+)")
_NGINX = re.compile(
    r"(?<![\w$])log_format\s+([\w.-]+)\s+(?:escape=\S+\s+)?"
    r"((?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\s+)+);"
)
_NGINX_PIECE = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
_APACHE = re.compile(r"^\s*LogFormat\s+\"((?:[^\"\\]|\\.)*)\"\s+([\w.-]+)\s*$",
                     re.MULTILINE | re.IGNORECASE)  # fmt: skip
_ESCAPE = re.compile(r"\\(.)")


def is_reference(spec: str) -> bool:
    """True for ``PATH:NAME`` where PATH looks like a file's (not a format string)."""
    match = _REFERENCE.fullmatch(spec.strip())
    return match is not None and ("/" in match[1] or "." in match[1])


def named_format(spec: str) -> str:
    """The format string ``PATH:NAME`` names: nginx's ``log_format NAME`` or Apache's
    ``LogFormat "..." NAME`` in that file. SpecError if the file or the name is not there."""
    match = _REFERENCE.fullmatch(spec.strip())
    assert match is not None, spec
    path, name = Path(match[1]).expanduser(), match[2]
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except IsADirectoryError:
        raise SpecError(f"--log-format {spec}: {path} is a directory",
                        "name the configuration file itself, e.g. /etc/nginx/nginx.conf:main"
                        ) from None
    except OSError as error:
        raise SpecError(f"--log-format {spec}: cannot read {path} ({error.strerror})",
                        "name your web server's configuration file and the format's name "
                        "in it, e.g. /etc/nginx/nginx.conf:main") from None
    found: dict[str, str] = {}
    for directive in _NGINX.finditer(text):
        pieces = (a or b for a, b in _NGINX_PIECE.findall(directive[2]))
        found.setdefault(directive[1], "".join(_ESCAPE.sub(r"\1", p) for p in pieces))
    for directive in _APACHE.finditer(text):
        found.setdefault(directive[2], _ESCAPE.sub(r"\1", directive[1]))
    if name in found:
        return found[name]
    names = ", ".join(sorted(found)) or "none"
    raise SpecError(
        f"{path} has no log format named {name} (log_format or LogFormat names: {names})",
        "give one of the names it has, or the file where your server's format is "
        "(nginx: log_format NAME '...'; Apache: LogFormat \"...\" NAME)",
    )
