"""The formats servers write, as their users have them: Apache LogFormat directives, a
format named in nginx.conf or apache2.conf, JSON lines in the layouts auto knows, and the
refusal of a JSON layout it does not know (its keys, and the flags that would read it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.errors import SpecError
from servelab.traffic.apache_format import nginx_equivalent
from servelab.traffic.formats import log_format
from servelab.traffic.reading import LogFormatError, read_log

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
NOON_UTC = 1714996800.0


def test_apache_directives_become_the_nginx_variables_of_the_same_meaning() -> None:
    assert nginx_equivalent('%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i"') == (
        '${remote_addr} ${remote_ident} ${remote_user} [$time_local] "${request}" ${status} '
        '${body_bytes_sent} "${http_referer}" "${http_user_agent}"'
    )
    assert nginx_equivalent("%t %{ms}T %D %T %{X-Forwarded-For}i 100%% %m %U%q") == (
        "[$time_local] ${apache_time_ms} ${apache_time_us} ${request_time} "
        "${http_x_forwarded_for} 100% ${request_method} ${uri}${apache_query}"
    )


@pytest.mark.parametrize(("spec", "lacks"), [
    ("%h %>s %b", "names no time (%t"),
    ("%h %t %>s", "no request (%r"),
    ("%{%Y-%m-%d}t %r", "written in a format of its own"),
    ("%t %r %j", "%j is not one Apache has"),
])  # fmt: skip
def test_an_apache_format_servelab_cannot_read_is_refused_in_one_line(
    spec: str, lacks: str
) -> None:
    with pytest.raises(SpecError) as caught:
        log_format(spec)
    assert lacks in caught.value.one_line() and "\n" not in caught.value.one_line()


def test_a_format_is_read_from_the_servers_configuration_by_its_name() -> None:
    main = log_format(f"{LOGS / 'nginx.conf'}:main")  # a log_format over three lines
    line = ('192.0.2.10 - - [06/May/2024:14:00:00 +0200] "GET /a HTTP/1.1" 200 612 "-" '
            '"Mozilla/5.0" "203.0.113.9"')
    record = main.parse(line)
    assert record is not None and (record.time, record.target) == (NOON_UTC, "/a")
    assert main.parse(line.rpartition(" ")[0]) is None  # main has the forwarded-for field
    timed = log_format(f"{LOGS / 'nginx.conf'}:timed")
    assert timed.parse('192.0.2.10 [06/May/2024:12:00:00 +0000] "GET /t HTTP/1.1" 200 0.004 '
                       '"curl/8"') is not None
    combined = log_format(f"{LOGS / 'apache2.conf'}:combined")  # LogFormat "..." combined
    assert combined.parse(line.rpartition(" ")[0]) is not None


def test_a_name_or_file_not_there_is_told_with_the_names_it_has(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        log_format(f"{LOGS / 'nginx.conf'}:mian")
    assert "no log format named mian" in caught.value.problem
    assert "json, main, timed" in caught.value.problem
    with pytest.raises(SpecError) as caught:
        log_format(f"{tmp_path}/nginx.conf:main")
    assert "cannot read" in caught.value.problem
    with pytest.raises(SpecError) as caught:
        log_format(f"{tmp_path}:main")
    assert "is a directory" in caught.value.problem


def test_auto_reads_the_json_layouts_servers_write() -> None:
    for name in ("nginx_json.jsonl", "caddy.jsonl", "traefik.jsonl", "lines.jsonl"):
        reader = read_log([LOGS / name], "auto", max_bad_share=0.5)
        records = list(reader)
        assert records and all(r.time >= NOON_UTC for r in records), name
        assert reader.counts.read >= 2, name


def test_a_json_layout_no_one_knows_is_refused_with_its_keys_and_the_flags(
    tmp_path: Path,
) -> None:
    log = tmp_path / "app.jsonl"
    line = {"when": "2024-05-06T12:00:00Z", "http": {"verb": "GET", "url": "/a"}, "code": 200}
    log.write_text((json.dumps(line) + "\n") * 150)
    with pytest.raises(LogFormatError) as caught:
        list(read_log([log], "auto"))
    fix = caught.value.fix
    assert "the keys when, http.verb, http.url, code" in fix
    assert ("--log-format json --log-field time=when --log-field method=http.verb "
            "--log-field path=http.url --log-field status=code") in fix
    mapped = log_format("json", {"time": "when", "method": "http.verb", "path": "http.url",
                                 "status": "code"})
    assert mapped.parse(json.dumps(line)) is not None  # the flags it gave do read it
