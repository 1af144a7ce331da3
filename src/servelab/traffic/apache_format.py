"""An Apache ``LogFormat`` string (mod_log_config's ``%`` directives) written as the nginx
``log_format`` that logs the same fields, so that one compiler reads both.

Each directive becomes the nginx variable of the same meaning (``%h`` ``$remote_addr``,
``%r`` ``$request``, ``%>s`` ``$status``, ``%{User-Agent}i`` ``$http_user_agent``); those
nginx has no name for get one of their own (``%{msec}t``, ``%q``), read as
``nginx_format`` says. Directives servelab does not need are read past, whatever they
carry. Apache's ``%t`` writes its brackets itself: ``[10/Oct/2000:13:55:36 -0700]``."""

from __future__ import annotations

import re

from servelab.errors import SpecError

# %[modifiers]{argument}letter, and %% (a literal %). Modifiers: < > (original or final
# request), ! and status lists (log only for some statuses: the field is then "-").
DIRECTIVE = re.compile(r"%(?:%|[<>!,0-9]*(?:\{([^}]*)\})?(\^t[io]|[a-zA-Z]))")
# A directive's nginx variable, by letter (no argument).
_BY_LETTER = {
    "h": "remote_addr", "a": "remote_addr", "A": "server_addr", "l": "remote_ident",
    "u": "remote_user", "t": "time_local", "r": "request", "s": "status",
    "m": "request_method", "U": "uri", "q": "apache_query", "H": "server_protocol",
    "b": "body_bytes_sent", "B": "body_bytes_sent", "O": "bytes_sent",
    "I": "request_length", "S": "bytes_transferred", "D": "apache_time_us",
    "T": "request_time", "p": "server_port", "P": "pid", "k": "connection_requests",
    "v": "server_name", "V": "server_name", "X": "apache_connection_status",
    "L": "request_id", "R": "apache_handler", "f": "request_filename",
}  # fmt: skip
# %{...}t: the time in a unit or a strftime format (begin: and end: name when it is taken).
_TIME_UNITS = {"sec": "apache_sec", "msec": "apache_msec", "usec": "apache_usec",
               "msec_frac": "apache_msec_frac", "usec_frac": "apache_usec_frac"}  # fmt: skip
APACHE_FIX = (
    "give the LogFormat string your Apache writes the log with, as its configuration has it "
    "(combined: '%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-Agent}i\"'), or its "
    "name there: --log-format /etc/apache2/apache2.conf:combined"
)


def is_apache_format(text: str) -> bool:
    """True for a format written with ``%`` directives and no nginx ``$variable``."""
    return "$" not in text and any(m[0] != "%%" for m in DIRECTIVE.finditer(text))


def nginx_equivalent(text: str) -> str:
    """The nginx ``log_format`` string that reads the lines ``text`` writes; SpecError for
    a format with no time or no request in it."""
    letters = {match[2] for match in DIRECTIVE.finditer(text)}
    lacking = []
    if "t" not in letters:
        lacking.append("time (%t, %{sec}t, %{msec}t or %{usec}t)")
    if "r" not in letters and not {"m", "U"} <= letters:
        lacking.append("request (%r, or %m with %U and %q)")
    if lacking:
        shown = text if len(text) <= 80 else text[:79] + "…"
        raise SpecError(f"the LogFormat {shown!r} names no {' and no '.join(lacking)}",
                        APACHE_FIX)
    pieces: list[str] = []
    end = 0
    seen: dict[str, int] = {}
    for match in DIRECTIVE.finditer(text):
        pieces.append(text[end : match.start()])
        end = match.end()
        if match[0] == "%%":
            pieces.append("%")
            continue
        variable = _variable(match[1], match[2], match[0])
        if variable == "time_local":
            pieces.append("[$time_local]")
            continue
        count = seen[variable] = seen.get(variable, 0) + 1
        if count > 1 and variable not in ("status",):  # a field written twice: read past
            variable = f"{variable}_{count}"
        pieces.append("${" + variable + "}")
    pieces.append(text[end:])
    return "".join(pieces)


def _variable(argument: str | None, letter: str, directive: str) -> str:
    if argument is None:
        if letter not in _BY_LETTER:
            raise SpecError(f"the LogFormat directive {directive} is not one Apache has",
                            APACHE_FIX)
        return _BY_LETTER[letter]
    name = re.sub(r"\W", "_", argument.lower())
    if letter == "t":
        unit = argument.removeprefix("begin:").removeprefix("end:")
        if unit in _TIME_UNITS:
            return _TIME_UNITS[unit]
        raise SpecError(
            f"the LogFormat time {directive} is written in a format of its own",
            "log the time as %t, %{sec}t, %{msec}t or %{usec}t (servelab reads those), or "
            "give the log as nginx writes it",
        )
    if letter == "T":  # %{s}T, %{ms}T, %{us}T: the time taken, read past
        return f"apache_time_{name}"
    if letter == "i":  # a request header: nginx's $http_... of the same
        return f"http_{name}"
    if letter in "oeCn":  # a response header, an environment variable, a cookie, a note
        return f"apache_{letter}_{name}"
    if letter in "pP":
        return f"apache_{letter}_{name}"
    if letter == "^ti" or letter == "^to":
        return f"apache_trailer_{name}"
    raise SpecError(f"the LogFormat directive {directive} is not one Apache has", APACHE_FIX)
