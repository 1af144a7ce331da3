"""Access-log lines read into requests: combined, common, auto, an nginx log_format of the
user's, JSON lines; times in every zone to UTC, garbage lines unreadable, not fatal."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.errors import SpecError
from servelab.traffic.formats import LOG_FORMAT_NAMES, LineParser, log_format
from servelab.traffic.records import LogRecord

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
NOON_UTC = 1714996800.0  # 2024-05-06 12:00:00 UTC: every fixture log starts there
CUSTOM = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '$request_time "$http_user_agent"'
)
COMBINED_LINE = (
    '127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a?b=1 HTTP/1.1" 200 2326 "ref" "ua"'
)
COMMON_LINE = '127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a?b=1 HTTP/1.0" 200 2326'
OCT_10_2000 = 971211336.0  # 10/Oct/2000:13:55:36 -0700 = 20:55:36 UTC


def lines_of(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def read(spec: str, line: str) -> tuple[float, str, str, int | None] | None:
    record = log_format(spec).parse(line)
    return None if record is None else (record.time, record.method, record.target, record.status)


def test_combined_lines_of_nginx() -> None:
    parser = log_format("combined")
    records = [parser.parse(line) for line in lines_of("combined.log")]
    assert records == [
        LogRecord(NOON_UTC, "GET", "/", 200),
        LogRecord(NOON_UTC + 1, "GET", "/articles/42?page=2", 200),
        LogRecord(NOON_UTC + 1, "POST", "/api/orders", 201),
        None,  # a TLS handshake sent to the HTTP port
        LogRecord(NOON_UTC, "GET", "/slow/report", 200),
        None,  # the blank line (the reader skips it before asking)
        None,  # "-": a connection closed before its request
        LogRecord(NOON_UTC + 5, "GET", "/search?q=a%20b", 200),  # a proxy's absolute URI
        LogRecord(NOON_UTC + 6, "HEAD", "/health", 204),
    ]
    assert read("combined", COMBINED_LINE) == (OCT_10_2000, "GET", "/a?b=1", 200)


def test_common_lines_of_apache_and_nginx() -> None:
    parser = log_format("common")
    first, second = (parser.parse(line) for line in lines_of("common.log"))
    assert first == LogRecord(NOON_UTC, "GET", "/index.html", 200)
    assert second == LogRecord(NOON_UTC + 1, "GET", "/apache_pb.gif", 304)  # ident, "-" bytes
    assert read("common", COMMON_LINE) == (OCT_10_2000, "GET", "/a?b=1", 200)


def test_combined_and_common_are_exact_and_auto_takes_either_with_more_fields() -> None:
    assert read("combined", COMMON_LINE) is None
    assert read("common", COMBINED_LINE) is None
    stock_main = COMBINED_LINE + ' "203.0.113.9"'  # nginx.conf's main: + $http_x_forwarded_for
    assert read("combined", stock_main) is None
    for line in (COMBINED_LINE, COMMON_LINE, stock_main, COMMON_LINE + " 0.004"):
        assert read("auto", line) == (OCT_10_2000, "GET", "/a?b=1", 200), line
    assert log_format("auto").name.startswith("auto")
    assert log_format(" Combined ").name == "combined"


@pytest.mark.parametrize(
    ("zone", "hour", "utc_hour"), [("+0200", 14, 12), ("-0700", 5, 12), ("+0000", 12, 12),
                                   ("+0530", 17, 11), ("-0000", 12, 12)],
)  # fmt: skip
def test_the_time_zone_of_a_line_is_applied(zone: str, hour: int, utc_hour: int) -> None:
    line = f'1.2.3.4 - - [06/May/2024:{hour:02d}:00:00 {zone}] "GET / HTTP/1.1" 200 1 "-" "-"'
    record = log_format("combined").parse(line)
    minutes = 30 if zone == "+0530" else 0
    assert record is not None
    assert record.time == NOON_UTC + (utc_hour - 12) * 3600 + minutes * 60


@pytest.mark.parametrize(
    "request_line",
    [
        "-",
        r"\x16\x03\x01\x00\xA5\x01\x00\x00\xA1\x03\x03",
        "GET",
        "GET /a HTTP/1.1 extra",
        "CONNECT example.com:443 HTTP/1.1",
        "OPTIONS * HTTP/1.1",
        "GET http:///nohost HTTP/1.1",
        "GET ftp://host/a HTTP/1.1",
        "1GET /a HTTP/1.1",
    ],
)
def test_a_request_line_that_is_no_request_is_unreadable(request_line: str) -> None:
    line = f'1.2.3.4 - - [06/May/2024:12:00:00 +0000] "{request_line}" 400 0 "-" "-"'
    assert read("combined", line) is None
    assert read("auto", line) is None


@pytest.mark.parametrize(
    ("time_local", "request_line"),
    [
        ("06/Foo/2024:12:00:00 +0000", "GET / HTTP/1.1"),
        ("31/Feb/2024:12:00:00 +0000", "GET / HTTP/1.1"),
        ("06/May/2024 12:00:00", "GET / HTTP/1.1"),
    ],
)
def test_a_line_with_no_time_is_unreadable(time_local: str, request_line: str) -> None:
    assert read("auto", f'1.2.3.4 - - [{time_local}] "{request_line}" 200 1') is None


def test_targets_are_replayable_paths() -> None:
    def target(raw: str) -> str | None:
        found = read("common", f'h - - [06/May/2024:12:00:00 +0000] "GET {raw} HTTP/1.1" 200 1')
        return None if found is None else found[2]

    assert target("http://host/p?q") == "/p?q"
    assert target("HTTPS://host:8443/p") == "/p"
    assert target("http://host") == "/"
    assert target("http://host?x=1") == "/?x=1"
    assert target("/a%20b?c=d&e") == "/a%20b?c=d&e"
    assert read("common", 'h - - [06/May/2024:12:00:00 +0000] "GET /old" 200 1') is not None


def test_an_nginx_log_format_of_the_user() -> None:
    parser = log_format(CUSTOM)
    records = [parser.parse(line) for line in lines_of("custom_nginx.log")]
    assert records == [
        LogRecord(NOON_UTC, "GET", "/items/7", 200),
        LogRecord(NOON_UTC + 2, "PUT", "/items/7", 204),
        LogRecord(NOON_UTC + 2, "DELETE", "/items/8?force=1", 404),
    ]
    assert "$remote_addr" in parser.name
    assert log_format("combined").parse(lines_of("custom_nginx.log")[0]) is None


def test_nginx_formats_with_other_times_and_request_parts() -> None:
    msec = log_format("$msec $request_method $request_uri $status")
    read = read_with(msec, "1714996800.123 get /c?d=1 200")
    assert read == (NOON_UTC + 0.123, "GET", "/c?d=1", 200)
    iso = log_format('$time_iso8601 "$request" $status')
    assert read_with(iso, '2024-05-06T14:00:00+02:00 "GET / HTTP/1.1" 200')[0] == NOON_UTC
    assert read_with(iso, '2024-05-06T12:00:00Z "GET / HTTP/1.1" 200')[0] == NOON_UTC
    uri_args = log_format("[$time_local] $request_method $uri $args")
    assert read_with(uri_args, "[06/May/2024:12:00:00 +0000] GET /p a=1")[2] == "/p?a=1"
    assert read_with(uri_args, "[06/May/2024:12:00:00 +0000] GET /p -")[2] == "/p"
    braces = log_format("${msec}|${request}|$status|$status")  # a variable twice: read once
    assert read_with(braces, "1714996800|GET /x HTTP/1.1|503|503") == (NOON_UTC, "GET", "/x", 503)
    unquoted = log_format("$time_local $request $status $body_bytes_sent")
    assert read_with(unquoted, "06/May/2024:12:00:00 +0000 GET /u HTTP/1.1 200 5") == (
        NOON_UTC, "GET", "/u", 200,
    )
    no_status = log_format("$msec $request")
    assert read_with(no_status, "1714996800 GET /x HTTP/1.1") == (NOON_UTC, "GET", "/x", None)


def test_an_nginx_log_format_as_pasted_from_nginx_conf() -> None:
    pasted = (
        "log_format timed '$remote_addr - $remote_user [$time_local] '\n"
        "                 '\"$request\" $status $body_bytes_sent '\n"
        "                 '$request_time \"$http_user_agent\"';"
    )
    line = lines_of("custom_nginx.log")[0]
    assert log_format(pasted).parse(line) == log_format(CUSTOM).parse(line)
    assert log_format(f"'{CUSTOM}'").parse(line) == log_format(CUSTOM).parse(line)


@pytest.mark.parametrize(
    ("spec", "lacks"),
    [
        ('$remote_addr "$request" $status', "names no time ($time_local"),
        ("[$time_local] $status $body_bytes_sent", "names no request ($request"),
        ("$msec $request_method $status", "names no request"),
        ("$remote_addr $status", "names no time ($time_local, $time_iso8601 or $msec) and no"),
    ],
)
def test_a_log_format_without_time_or_request_says_what_it_lacks(spec: str, lacks: str) -> None:
    with pytest.raises(SpecError) as caught:
        log_format(spec)
    assert lacks in caught.value.one_line() and "\n" not in caught.value.one_line()
    assert "log_format" in caught.value.fix


def test_an_unknown_format_names_the_choices() -> None:
    with pytest.raises(SpecError) as caught:
        log_format("apache")
    assert "unknown log format 'apache'" in caught.value.problem
    assert all(name in caught.value.fix for name in LOG_FORMAT_NAMES)
    assert "--log-format '" in caught.value.fix and "\n" not in caught.value.one_line()
    with pytest.raises(SpecError, match="but the log format is 'combined'"):
        log_format("combined", {"time": "ts"})


def test_json_lines_with_the_default_keys() -> None:
    parser = log_format("json")
    records = [parser.parse(line) for line in lines_of("lines.jsonl")]
    assert records == [
        LogRecord(NOON_UTC, "GET", "/a", 200),  # Z
        LogRecord(NOON_UTC + 1, "POST", "/b?x=1", 201),  # +02:00, a status as text
        LogRecord(NOON_UTC + 2, "GET", "/c", None),  # no zone: UTC; no status
        LogRecord(NOON_UTC + 3, "GET", "/d", 200),  # epoch seconds
        LogRecord(NOON_UTC + 4.25, "GET", "/e", 200),  # epoch milliseconds
        LogRecord(NOON_UTC + 5.5, "GET", "/f", 200),  # no method: the request line in path
        None,  # no JSON
        None,  # no time
    ]


def test_json_lines_with_the_users_keys_nested_or_dotted() -> None:
    parser = log_format(
        "JSON", {"time": "ts", "method": "request.method", "path": "request.uri", "status": "code"}
    )
    nested = '{"ts": 1714996800, "request": {"method": "get", "uri": "/n?x"}, "code": 200}'
    assert read_with(parser, nested) == (NOON_UTC, "GET", "/n?x", 200)
    dotted = '{"ts": 1714996800, "request.method": "PUT", "request.uri": "/d", "code": 204}'
    assert read_with(parser, dotted) == (NOON_UTC, "PUT", "/d", 204)
    assert "time=ts" in parser.name
    line_only = log_format("json", {"target": "req"})  # target: the record's name of path
    assert read_with(line_only, '{"time": 1714996800, "req": "DELETE /x HTTP/1.1"}')[1] == "DELETE"


@pytest.mark.parametrize(
    "line",
    [
        "[1, 2]",
        '{"time": 1714996800, "method": "GET"}',
        '{"time": true, "method": "GET", "path": "/"}',
        '{"time": 1e999, "method": "GET", "path": "/"}',
        '{"time": ' + "9" * 400 + ', "method": "GET", "path": "/"}',
        '{"time": -5, "method": "GET", "path": "/"}',
        '{"time": 1714996800, "method": 7, "path": "/"}',
        '{"time": 1714996800, "method": "GET", "path": "no-slash"}',
        '{"time": 1714996800, "path": "/plain-path-without-method"}',
        '{"time": 1714996800, "method": "GET", "path": "/", ',
        "[" * 100000,
    ],
)
def test_json_lines_that_are_no_request_are_unreadable(line: str) -> None:
    assert log_format("json").parse(line) is None


def test_json_fields_are_checked() -> None:
    with pytest.raises(SpecError, match="unknown log field 'url'"):
        log_format("json", {"url": "u"})
    with pytest.raises(SpecError, match="mapped to no key"):
        log_format("json", {"time": " "})
    with pytest.raises(SpecError, match="mapped twice"):
        log_format("json", {"path": "p", "target": "t"})


def read_with(parser: LineParser, line: str) -> tuple[float, str, str, int | None]:
    record = parser.parse(line)
    assert record is not None, line
    return (record.time, record.method, record.target, record.status)
