"""A generated access log with every quirk servelab's reader handles, for checking that a
faster reader gives the same records, line for line (tests/unit/traffic/test_golden.py;
its golden files were written by the regular-expression reader the fast one replaced).
Importable as ``quirk_log``: tests/ is on sys.path (tests/conftest.py lives there).

``quirk_log(seed, lines)`` is bytes, not text: CR line ends, bytes that are not UTF-8 and
a line longer than the reader keeps are part of the quirks. The same seed, the same log.
"""

from __future__ import annotations

import random

NOON_UTC = 1714996800  # 2024-05-06 12:00:00 UTC
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
ZONES = ((0, "+0000"), (7200, "+0200"), (-25200, "-0700"), (19800, "+0530"), (7200, "+02:00"))
AGENTS = ("Mozilla/5.0 (X11; Linux x86_64)", "curl/8.5.0", "-", "okhttp/4.12")
TARGETS = (
    "/", "/items/42", "/items/42?page=2", "/api/orders", "/static/app.3f2a9c.css",
    "/search?q=a%20b", "/caf\u00e9", "/a b", "/x\u00a0y",
)


def _clock(epoch: int, shift: int, zone: str, fraction: str = "") -> str:
    """``06/May/2024:14:00:00 +0200``: the time as nginx writes it in ``zone``."""
    seconds = epoch + shift
    days, rest = divmod(seconds - NOON_UTC + 12 * 3600, 86400)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    return f"{6 + days:02d}/May/2024:{hour:02d}:{minute:02d}:{second:02d}{fraction} {zone}"


def _request(rng: random.Random) -> str:
    """A request line: mostly ordinary, sometimes one of the odd ones logs hold."""
    odd = rng.random()
    target = rng.choice(TARGETS)
    if odd < 0.80:
        return f"{rng.choice(('GET', 'GET', 'POST', 'HEAD'))} {target} {rng.choice(('HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0'))}"  # noqa: E501
    return rng.choice((
        "-", "", "get /lower HTTP/1.1", "GET http://example.com/proxied?x=1 HTTP/1.1",
        "GET https://example.com HTTP/1.1", "CONNECT example.com:443 HTTP/1.1",
        "OPTIONS * HTTP/1.1", "GET /nine", "GET  /two-spaces HTTP/1.1",
        "GET /tab\there HTTP/1.1", "M-SEARCH /upnp HTTP/1.1", "G3T /digit HTTP/1.1",
        "PROPFIND /dav/ HTTP/1.1", "GET /v HTTP/3", "GET /v HTTP/1.1.1",
        "\\x16\\x03\\x01\\x02\\x00\\x01\\x00\\x01\\xFC\\x03\\x03", "GET /esc\\\\aped HTTP/1.1",
        "GET /q\\x22uote HTTP/1.1", "GET /\u00e9t\u00e9 HTTP/1.1", "GET http:///nohost HTTP/1.1",
    ))


def _line(rng: random.Random, epoch: int) -> str:
    """One line of a format auto reads (or of none), at ``epoch``."""
    shift, zone = rng.choice(ZONES)
    fraction = ".250" if rng.random() < 0.03 else ""
    clock = _clock(epoch, shift, zone, fraction)
    if rng.random() < 0.02:
        clock = rng.choice((
            "31/Feb/2024:12:00:00 +0000", "06/May/2024:25:00:00 +0000",
            "06/may/2024:12:00:00 +0000", "06/Mai/2024:12:00:00 +0000",
            "6/May/2024:12:00:00 +0000", "06/May/2024:12:00:00 +000",
            "\u0660\u0666/May/2024:12:00:00 +0000",
        ))
    addr = rng.choice(("192.0.2.10", "2001:db8::1", "", 'x"y', "10.0.0.[1"))
    ident = rng.choice(("-", "-", "-", "ident"))
    user = rng.choice(("-", "-", "alice", "a[b", "bob\u00e9"))
    status = rng.choice(("200", "200", "201", "304", "404", "502", "-", "099", "1000", "abc"))
    size = rng.choice(("612", "0", "-", "5120"))
    agent = rng.choice(AGENTS)
    if rng.random() < 0.03:
        agent = rng.choice(('Mo\\x22zilla', 'quoted \\"ua\\"', "tab\there", 'ends\\'))
    head = f'{addr} {ident} {user} [{clock}] "{_request(rng)}" {status} {size}'
    shape = rng.random()
    if shape < 0.70:
        return f'{head} "{rng.choice(("-", "https://example.com/"))}" "{agent}"'
    if shape < 0.82:
        return head  # common
    if shape < 0.90:
        return f'{head} "-" "{agent}" "203.0.113.9"'  # nginx's stock main
    if shape < 0.95:
        return f"{head} 0.004"  # common with a request time after it
    return rng.choice((
        f'{head} "-" "{agent}"x', f'{head}  "-" "{agent}"', f'{head} "-"', f"{head}\t0.1",
        "\x16\x03\x01\x02\x00", "not a log line at all", f"{head} \"-\" \"{agent}\" 'x'",
    ))


def quirk_log(seed: int = 0, lines: int = 2000) -> bytes:
    """``lines`` lines (about) a second or less apart, with lines a few seconds out of
    order, some too late to reorder, blank ones, CR and CRLF ends, bytes that are not
    UTF-8, one line longer than the reader keeps, and no newline after the last."""
    rng = random.Random(seed)
    out: list[bytes] = []
    epoch = NOON_UTC
    for _ in range(lines):
        epoch += rng.choice((0, 0, 0, 1))
        late = rng.random()
        behind = rng.randint(1, 4) if late < 0.05 else rng.randint(6, 30) if late < 0.07 else 0
        at = epoch - behind  # a few seconds: reordered; more than 5: too late
        text = _line(rng, at).encode()
        special = rng.random()
        if special < 0.01:
            text = b""
        elif special < 0.02:
            text = b"   \t "
        elif special < 0.03:
            text = text.replace(b"/", b"/\xff\xfe", 1)  # not UTF-8
        elif special < 0.035:
            text = text[: len(text) // 2] + b"\r" + text[len(text) // 2 :]  # a lone CR
        end = b"\r\n" if rng.random() < 0.05 else b"\n"
        out.append(text + end)
    at = len(out) // 2
    long_target = "/long/" + "a" * 70000
    out.insert(at, _line(rng, epoch).replace('"GET /', f'"GET {long_target}', 1).encode() + b"\n")
    out.insert(at, (b"x" * 65535) + b"\n")
    out.insert(at, (b"y" * 65536) + b"\n")
    return b"".join(out).rstrip(b"\n")
