"""The reader's records, line for line, against golden files: the fixture logs in each
format they are written in, and a generated log with every quirk the reader handles
(tests/quirk_log.py), in one file and split over a plain and a gzip file.

The golden files of the combined, common, custom nginx and JSON fixtures and of the
quirk logs were written by the regular-expression reader that the fast one replaced: a
difference is a change of behaviour, not a new golden file. Those of the Apache, server
configuration, nginx escape=json, Caddy and Traefik fixtures by the reader that added
them, each checked by hand against its lines. Rewrite them only on purpose:
``SERVELAB_WRITE_GOLDEN=1 .venv/bin/pytest tests/unit/traffic/test_golden.py``."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from quirk_log import quirk_log

from servelab.traffic.formats import log_format
from servelab.traffic.reading import read_log

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
GOLDEN = LOGS / "golden"
CUSTOM = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '$request_time "$http_user_agent"'
)
# (golden file, the logs (in LOGS, or made by quirk_log), the format)
FIXTURES = [
    ("combined.combined", ("combined.log",), "combined"),
    ("combined.auto", ("combined.log",), "auto"),
    ("common.common", ("common.log",), "common"),
    ("common.auto", ("common.log",), "auto"),
    ("custom_nginx.custom", ("custom_nginx.log",), CUSTOM),
    ("lines.json", ("lines.jsonl",), "json"),
    # Written by the reader that added these formats, checked by hand against the lines.
    ("apache_custom.logformat", ("apache_custom.log",), '%t %>s %D "%r" %h %b "%{User-Agent}i"'),
    ("apache_custom.named", ("apache_custom.log",), str(LOGS / "apache2.conf") + ":timed"),
    ("apache_directives.logformat", ("apache_directives.log",),
     '%a %{usec}t "%m %U%q %H" %>s %B %{ms}T %T "%{Referer}i"'),
    ("apache_vhost.named", ("apache_vhost.log",), str(LOGS / "apache2.conf") + ":vhost_combined"),
    ("nginx_main.named", ("nginx_main.log",), str(LOGS / "nginx.conf") + ":main"),
    ("nginx_json.auto", ("nginx_json.jsonl",), "auto"),
    ("nginx_json.json", ("nginx_json.jsonl",), "json"),
    ("caddy.auto", ("caddy.jsonl",), "auto"),
    ("traefik.auto", ("traefik.jsonl",), "auto"),
]
QUIRKS = [
    (f"quirks{seed}.{name}", seed, spec, split)
    for seed in (0, 1)
    for name, spec in (("auto", "auto"), ("combined", "combined"), ("common", "common"))
    for split in (False, True)
    if not split or name == "auto"
]


def reading(paths: list[Path], spec: str) -> list[object]:
    """What the reader gives, as JSON values: each record, then the counts."""
    reader = read_log(paths, log_format(spec), max_bad_share=1.0)
    rows: list[object] = [
        [r.time, r.method, r.target, r.status, Path(r.source).name, r.line] for r in reader
    ]
    counts = reader.counts
    first = counts.first_unreadable
    rows.append({
        "files": counts.files, "lines": counts.lines, "read": counts.read,
        "unreadable": counts.unreadable, "reordered": counts.reordered,
        "too_late": counts.too_late,
        "first_unreadable": None if first is None else [Path(first.source).name, first.line,
                                                        first.text],
    })
    return rows


def check(name: str, rows: list[object]) -> None:
    path = GOLDEN / f"{name}.jsonl"
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if os.environ.get("SERVELAB_WRITE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    golden = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(golden)
    for row, expected in zip(rows, golden, strict=True):
        assert json.loads(json.dumps(row, ensure_ascii=False)) == expected


@pytest.mark.parametrize(("name", "logs", "spec"), FIXTURES, ids=[f[0] for f in FIXTURES])
def test_the_fixture_logs_read_as_their_golden_files(
    name: str, logs: tuple[str, ...], spec: str
) -> None:
    check(name, reading([LOGS / log for log in logs], spec))


@pytest.mark.parametrize(
    ("name", "seed", "spec", "split"), QUIRKS,
    ids=[name + ("-split" if split else "") for name, _, _, split in QUIRKS],
)
def test_a_log_of_every_quirk_reads_as_its_golden_file(
    tmp_path: Path, name: str, seed: int, spec: str, split: bool
) -> None:
    data = quirk_log(seed, 3000)
    if not split:
        path = tmp_path / "quirks.log"
        path.write_bytes(data)
        check(name, reading([path], spec))
        return
    cut = data.index(b"\n", len(data) // 2) + 1  # two files: the older gzip, then plain
    older, newer = tmp_path / "quirks.log.1.gz", tmp_path / "quirks.log"
    with gzip.open(older, "wb") as stream:
        stream.write(data[:cut])
    newer.write_bytes(data[cut:])
    check(name + ".split", reading([older, newer], spec))
