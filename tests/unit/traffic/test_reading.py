"""Reading access logs as one stream in time order: gzip or plain, several files, lines a
little out of order put back, too many unreadable lines refused naming the first, and
memory that stays the window's whatever the log's size."""

from __future__ import annotations

import gzip
import tracemalloc
from collections.abc import Iterable
from pathlib import Path

import pytest

from servelab.errors import SpecError
from servelab.traffic.reading import EARLY_LINES, LogFormatError, ReadCounts, read_log
from servelab.traffic.records import LogRecord

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
NOON_UTC = 1714996800.0  # 2024-05-06 12:00:00 UTC


def line_at(second: float, path: str = "/", status: int = 200) -> str:
    """A combined line ``second`` seconds after noon UTC (written in +0000)."""
    whole = int(second)
    clock = f"{12 + whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
    return f'10.0.0.1 - - [06/May/2024:{clock} +0000] "GET {path} HTTP/1.1" {status} 5 "-" "t"'


def write(path: Path, lines: Iterable[str], *, compressed: bool = False) -> Path:
    text = "".join(line + "\n" for line in lines)
    if compressed:
        with gzip.open(path, "wt") as stream:
            stream.write(text)
    else:
        path.write_text(text)
    return path


def seconds(records: Iterable[LogRecord]) -> list[float]:
    return [record.time - NOON_UTC for record in records]


def test_the_combined_fixture_in_time_order_with_its_counts() -> None:
    reader = read_log([LOGS / "combined.log"], "combined", max_bad_share=0.5)
    records = list(reader)
    assert [(r.time - NOON_UTC, r.target) for r in records] == [
        (0, "/"), (0, "/slow/report"), (1, "/articles/42?page=2"), (1, "/api/orders"),
        (5, "/search?q=a%20b"), (6, "/health"),
    ]  # fmt: skip
    assert {r.source for r in records} == {str(LOGS / "combined.log")}
    assert [r.line for r in records] == [1, 5, 2, 3, 8, 9]  # lines as the file numbers them
    assert reader.counts == ReadCounts(
        files=1, lines=8, read=6, unreadable=2, reordered=1, too_late=0,
        first_unreadable=reader.counts.first_unreadable,
    )  # fmt: skip
    first = reader.counts.first_unreadable
    assert first is not None and (first.line, first.text[:13]) == (4, "192.0.2.13 - ")
    assert (reader.lines, reader.read, reader.unreadable, reader.files) == (8, 6, 2, 1)
    assert reader.counts.yielded == 6 and reader.counts.unreadable_share == 0.25


def test_every_fixture_reads_with_its_format() -> None:
    for name, spec in [("common.log", "auto"), ("lines.jsonl", "json"), ("custom_nginx.log",
                       '$remote_addr - $remote_user [$time_local] "$request" $status '
                       '$body_bytes_sent $request_time "$http_user_agent"')]:
        records = list(read_log([LOGS / name], spec, max_bad_share=0.3))
        assert records and records[0].time == NOON_UTC, name


def test_gzip_is_known_by_its_bytes_and_files_read_as_one_stream(tmp_path: Path) -> None:
    oldest = write(tmp_path / "access.log.2.gz", [line_at(0), line_at(1)], compressed=True)
    older = write(tmp_path / "access.log.1", [line_at(2), line_at(3)], compressed=True)  # no .gz
    current = write(tmp_path / "access.log", [line_at(4), "", line_at(5)])
    reader = read_log([oldest, older, current], "combined")
    records = list(reader)
    assert seconds(records) == [0, 1, 2, 3, 4, 5]
    assert [(Path(r.source).name, r.line) for r in records][-2:] == [
        ("access.log", 1), ("access.log", 3),
    ]
    assert (reader.files, reader.lines, reader.unreadable) == (3, 6, 0)  # blank: no line


def test_a_seam_within_the_window_is_put_in_order(tmp_path: Path) -> None:
    # The rotated file's last request ended after the new file's first was logged.
    older = write(tmp_path / "access.log.1", [line_at(0), line_at(10)])
    current = write(tmp_path / "access.log", [line_at(8), line_at(12)])
    reader = read_log([older, current], "combined", reorder_s=5)
    assert seconds(reader) == [0, 8, 10, 12]
    assert (reader.reordered, reader.too_late) == (1, 0)


def test_files_given_newest_first_are_refused_naming_them(tmp_path: Path) -> None:
    older = write(tmp_path / "access.log.1", [line_at(0), line_at(60)])
    current = write(tmp_path / "access.log", [line_at(120), line_at(180)])
    with pytest.raises(SpecError) as caught:
        list(read_log([current, older], "combined"))
    said = caught.value.one_line()
    assert f"{older} starts before {current} ends" in said and "oldest first" in said
    with pytest.raises(SpecError, match="starts before"):
        list(read_log([older, older], "combined"))  # the same file twice


def test_lines_out_of_order_within_the_window_are_sorted_beyond_it_dropped(
    tmp_path: Path,
) -> None:
    # 4 and 14 come after later records were yielded (they can no longer be put in their
    # place); 20 is 11 s older than the newest, but none newer than it is out yet.
    order = [0, 2, 1, 5, 3, 9, 12, 30, 4, 31, 20, 32, 14, 33]
    log = write(tmp_path / "access.log", [line_at(s, f"/{s}") for s in order])
    reader = read_log([log], "combined", reorder_s=5)
    records = list(reader)
    assert seconds(records) == [0, 1, 2, 3, 5, 9, 12, 20, 30, 31, 32, 33]
    assert [r.target for r in records][:4] == ["/0", "/1", "/2", "/3"]
    assert (reader.reordered, reader.too_late, reader.read) == (3, 2, 14)
    assert reader.counts.yielded == 12
    strict = read_log([log], "combined", reorder_s=0)
    assert seconds(strict) == [0, 2, 5, 9, 12, 30, 31, 32, 33]
    assert (strict.too_late, strict.reordered) == (5, 0)


def test_equal_times_keep_the_log_order(tmp_path: Path) -> None:
    log = write(tmp_path / "access.log", [line_at(0, f"/{n}") for n in range(20)])
    assert [r.target for r in read_log([log], "combined")] == [f"/{n}" for n in range(20)]


def test_too_many_unreadable_lines_are_refused_naming_the_first(tmp_path: Path) -> None:
    lines = [line_at(s) for s in range(200)]
    lines[150] = "x" * 300  # one in 200 is 0.5 %: allowed
    log = write(tmp_path / "access.log", lines)
    assert len(list(read_log([log], "combined"))) == 199
    lines[160] = '10.0.0.1 - - [06/May/2024:12:02:40 +0000] "\\x16\\x03\\x01" 400 0 "-" "-"'
    lines[170] = '10.0.0.1 - - [06/May/2024:12:02:50 +0000] "-" 400 0 "-" "-"'  # 3: 1.5 %
    log = write(tmp_path / "access.log", lines)
    reader = read_log([log], "combined")
    with pytest.raises(LogFormatError) as caught:
        list(reader)
    said = caught.value.one_line()
    assert "\n" not in said and isinstance(caught.value, SpecError)
    assert "1.5% of the lines of" in said and f"{log} line 151: 'xxx" in said
    assert "x" * 130 not in said and "…" in said  # the bad line cut
    assert "--log-format" in caught.value.fix and "--log-field" in caught.value.fix
    assert (reader.unreadable, reader.lines) == (3, 200)
    assert len(list(read_log([log], "combined", max_bad_share=0.05))) == 197


def test_a_wrong_format_is_refused_before_the_file_is_read_to_its_end(tmp_path: Path) -> None:
    log = write(tmp_path / "access.log", [line_at(s) for s in range(5000)])
    reader = read_log([log], "json")
    with pytest.raises(LogFormatError) as caught:
        list(reader)
    assert reader.lines == EARLY_LINES
    said = caught.value.one_line()
    assert f"none of the first {EARLY_LINES} lines of {log} can be read as json" in said
    assert "line 1: '10.0.0.1 - - [06/May" in said


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_an_empty_log_is_told(tmp_path: Path, content: str) -> None:
    log = tmp_path / "access.log"
    log.write_text(content)
    with pytest.raises(SpecError, match=f"the access log {log} is empty"):
        list(read_log([log], "auto"))
    full = write(tmp_path / "access.log.1", [line_at(0)])
    assert len(list(read_log([full, log], "auto"))) == 1  # one empty file among others


def test_a_missing_or_unreadable_file_is_named_before_reading(tmp_path: Path) -> None:
    present = write(tmp_path / "access.log", [line_at(0)])
    with pytest.raises(SpecError) as caught:
        read_log([present, tmp_path / "gone.log"], "auto")
    assert f"cannot read the access log {tmp_path / 'gone.log'}: No such file" in str(
        caught.value
    )
    with pytest.raises(SpecError, match=r"the access log .* is a directory"):
        read_log([tmp_path], "auto")
    with pytest.raises(SpecError, match="no access log given"):
        read_log([], "auto")


def test_a_gzip_file_cut_short_is_named(tmp_path: Path) -> None:
    whole = write(tmp_path / "whole.gz", [line_at(s) for s in range(2000)], compressed=True)
    cut = tmp_path / "access.log.2.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(SpecError, match=f"cannot read the access log {cut} to its end"):
        list(read_log([cut], "combined"))


def test_odd_bytes_and_overlong_lines_are_lines_not_crashes(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    good = line_at(0).encode()
    log.write_bytes(good.replace(b"GET /", b"GET /caf\xe9") + b"\r\n" + b"y" * 200_000 + b"\n"
                    + line_at(1).encode() + b"\n")  # fmt: skip
    reader = read_log([log], "combined", max_bad_share=0.5)
    assert [r.target for r in reader] == ["/caf\ufffd", "/"]
    assert (reader.lines, reader.unreadable) == (3, 1)


def test_the_options_are_checked(tmp_path: Path) -> None:
    log = write(tmp_path / "access.log", [line_at(0)])
    with pytest.raises(SpecError, match="reorder window"):
        read_log([log], "auto", reorder_s=-1)
    with pytest.raises(SpecError, match="is not a share"):
        read_log([log], "auto", max_bad_share=1.5)
    with pytest.raises(SpecError, match="unknown log format"):
        read_log([log], "nginx")


def test_memory_stays_the_windows_whatever_the_logs_size(tmp_path: Path) -> None:
    """Logs of 10,000 and 60,000 lines at 100 a second, some logged 2 s late: reading
    the larger (5 MB, 120 times the 5-second window) holds no more than the smaller,
    and far less than the file. (60,000 rather than more: tracemalloc makes a line
    cost ~50 us.)"""

    def peak_reading(lines: int) -> tuple[int, int]:
        log = tmp_path / f"{lines}.log"
        with log.open("w") as stream:
            for n in range(lines):
                late = 2 if n % 97 == 0 else 0  # a slow request, logged 2 s late
                second = max(0.0, n / 100 - late)
                stream.write(line_at(second, f"/items/{n % 1000}?page={n}") + "\n")
        reader = read_log([log], "auto")
        tracemalloc.start()
        try:
            count = sum(1 for _ in reader)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert count == lines and reader.too_late == 0 and reader.reordered > lines // 100
        return peak, log.stat().st_size

    small_peak, _ = peak_reading(10_000)
    large_peak, large_size = peak_reading(60_000)
    assert large_size > 5_000_000
    assert large_peak < 1_000_000, f"peak {large_peak / 1e6:.2f} MB"
    assert large_peak < 1.25 * small_peak + 50_000, (small_peak, large_peak)
