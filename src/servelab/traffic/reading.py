"""An access log read as a stream of requests in time order, in bounded memory.

Files are read in the order given, as one stream: a rotated set is given oldest first
(``access.log.2.gz access.log.1 access.log``), and the reorder window absorbs the
disorder at a seam. A file whose first request is older than the window allows (given
out of order, or twice) is refused rather than dropped line by line. gzip files are
known by their first bytes, whatever their name.

Lines come slightly out of order (a server logs a request when it ends, with the time
it began or the second its worker last looked at the clock), so records are held for
``reorder_s`` seconds of log time and come out sorted; a record older than one already
yielded is too late, dropped and counted. Only those records are held (and a block of
lines being read): the memory is the window's, whatever the log's size."""

from __future__ import annotations

import bisect
import gzip
import math
import operator
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from servelab.errors import SpecError
from servelab.traffic.formats import LOG_FORMAT_FIX, LineParser, format_hint, log_format
from servelab.traffic.records import LogRecord

GZIP_MAGIC = b"\x1f\x8b"
EARLY_LINES = 100  # a file none of whose first lines reads is in another format
MAX_LINE_CHARS = 65536  # longer lines are cut: a file with no newlines stays bounded
BLOCK_CHARS = 1 << 16  # read at a time, then split into lines
_TIME = operator.itemgetter(0)  # a LogRecord's time
SHOWN_CHARS = 120  # of a bad line, in the one-line message


@dataclass(frozen=True)
class UnreadableLine:
    """Where the first line that could not be read is, and its text (cut)."""

    source: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.source} line {self.line}: {self.text!r}"


@dataclass(frozen=True)
class ReadCounts:
    """What reading the log found. ``lines`` counts the lines that are not blank, each
    ``read`` or ``unreadable``; of those read, ``too_late`` were dropped and ``reordered``
    came out of order and were put in their place."""

    files: int = 0
    lines: int = 0
    read: int = 0
    unreadable: int = 0
    reordered: int = 0
    too_late: int = 0
    first_unreadable: UnreadableLine | None = None

    @property
    def yielded(self) -> int:
        return self.read - self.too_late

    @property
    def unreadable_share(self) -> float:
        return self.unreadable / self.lines if self.lines else 0.0


class LogFormatError(SpecError):
    """Too many of the log's lines cannot be read: most likely the format is not the one
    named. Its one line names where the first bad line is, and the line."""


class LogReader:
    """The records of an access log, in time order. While and after it is iterated, its
    attributes count what reading found (``counts``: the same, frozen); each iteration
    reads the files anew and counts anew."""

    def __init__(
        self, paths: Sequence[Path], parser: LineParser, *, reorder_s: float, max_bad_share: float
    ) -> None:
        self.paths = tuple(paths)
        self.parser = parser
        self.reorder_s = reorder_s
        self.max_bad_share = max_bad_share
        self._start_counting()

    def _start_counting(self) -> None:
        self.files = self.lines = self.read = self.unreadable = 0
        self.reordered = self.too_late = 0
        self.first_unreadable: UnreadableLine | None = None
        self._first_text = ""  # the first unreadable line, whole

    @property
    def counts(self) -> ReadCounts:
        return ReadCounts(
            self.files, self.lines, self.read, self.unreadable, self.reordered,
            self.too_late, self.first_unreadable,
        )  # fmt: skip

    def __iter__(self) -> Iterator[LogRecord]:
        """The records in time order (a stable sort of the lines' times), as a heap of
        ``reorder_s`` seconds would give them, but held in a list sorted in batches:
        timsort on a nearly sorted list costs less than a heap's push and pop a line."""
        self._start_counting()
        self._pending: list[LogRecord] = []
        self._last_out = -math.inf  # the time of the last record given out
        newest = floor = -math.inf  # floor: newest - reorder_s; older is out of place
        newest_source = ""
        reorder_s = self.reorder_s
        parse = self.parser.parse
        pending = self._pending
        for path in self.paths:
            self.files += 1
            source = str(path)
            first_of_file = True
            read_here = unreadable_here = number = 0
            first_here: UnreadableLine | None = None
            lines, read, reordered = self.lines, self.read, self.reordered
            with _opened(path) as stream:
                for block in _line_blocks(stream, source):
                    for line in block:
                        number += 1
                        text = line.rstrip()
                        if not text:
                            continue
                        lines += 1
                        record = parse(text, source, number)
                        if record is None:
                            self.lines, self.read, self.reordered = lines, read, reordered
                            self.unreadable += 1
                            unreadable_here += 1
                            if first_here is None:
                                first_here = UnreadableLine(source, number, _shown(text))
                                if self.first_unreadable is None:
                                    self.first_unreadable, self._first_text = first_here, text
                            if unreadable_here == EARLY_LINES and read_here == 0:
                                yield from self._release(floor)
                                raise LogFormatError(
                                    f"none of the first {EARLY_LINES} lines of {source} can "
                                    f"be read as {self.parser.name} (first: {first_here})",
                                    format_hint(self.parser, text) or LOG_FORMAT_FIX,
                                )
                            continue
                        read += 1
                        read_here += 1
                        time = record[0]
                        if time < floor:  # out of place: what a heap would do, exactly
                            self.lines, self.read, self.reordered = lines, read, reordered
                            yield from self._release(floor)
                            if first_of_file:
                                raise _out_of_order(record, newest, newest_source)
                            if time < self._last_out:
                                self.too_late += 1
                                continue
                            reordered += 1
                        elif time < newest:
                            reordered += 1
                        else:
                            newest, floor, newest_source = time, time - reorder_s, source
                        first_of_file = False
                        pending.append(record)
                    self.lines, self.read, self.reordered = lines, read, reordered
                    if len(pending) >= self._hold:
                        yield from self._release(floor)
        yield from self._release(math.inf)
        self._check_whole()

    _hold = 1024  # records held before they are sorted; doubles with what the window keeps

    def _release(self, up_to: float) -> Iterator[LogRecord]:
        """The held records up to ``up_to`` (the window's floor), in time order."""
        pending = self._pending
        pending.sort(key=_TIME)
        cut = bisect.bisect_right(pending, up_to, key=_TIME)
        if cut:
            self._last_out = pending[cut - 1].time
            out = pending[:cut]
            del pending[:cut]
            yield from out
        self._hold = max(LogReader._hold, 2 * len(pending))

    def _check_whole(self) -> None:
        names = ", ".join(str(path) for path in self.paths)
        if self.lines == 0:
            raise SpecError(
                f"the access log {names} is empty: it has no request to read",
                "give the log of the traffic to replay (a rotated log's older files are "
                "access.log.1, access.log.2.gz, ...)",
            )
        share = self.unreadable / self.lines
        if share > self.max_bad_share:
            raise LogFormatError(
                f"{share:.1%} of the lines of {names} cannot be read as {self.parser.name} "
                f"({self.unreadable} of {self.lines}; allowed {self.max_bad_share:.1%}; "
                f"first: {self.first_unreadable})",
                format_hint(self.parser, self._first_text) or LOG_FORMAT_FIX,
            )


def read_log(
    paths: Sequence[Path],
    fmt: LineParser | str,
    *,
    reorder_s: float = 5.0,
    max_bad_share: float = 0.01,
) -> LogReader:
    """The access log in ``paths`` (oldest file first) read with ``fmt`` (a parser, or a
    spec for ``log_format``). Every file is checked here, so that a missing one is told
    before anything is read; the lines are read as the reader is iterated."""
    if not paths:
        raise SpecError("no access log given", "name the log file(s), oldest first")
    if not math.isfinite(reorder_s) or reorder_s < 0:
        raise SpecError(f"the reorder window {reorder_s} s is not a time", "give 0 s or more")
    if not 0 <= max_bad_share <= 1:
        raise SpecError(
            f"the share of unreadable lines allowed, {max_bad_share}, is not a share",
            "give a number from 0 to 1 (0.01: one line in a hundred)",
        )
    for path in paths:
        _check_readable(Path(path))
    parser = log_format(fmt) if isinstance(fmt, str) else fmt
    return LogReader(
        [Path(path) for path in paths], parser, reorder_s=reorder_s, max_bad_share=max_bad_share
    )


def _check_readable(path: Path) -> None:
    if path.is_dir():
        raise SpecError(f"the access log {path} is a directory",
                        "name the log file(s) in it, oldest first (DIR/access.log.1 "
                        "DIR/access.log)")
    try:
        with path.open("rb") as stream:
            stream.read(1)
    except OSError as error:
        raise _unreadable_file(path, error) from None


def _unreadable_file(path: Path, error: BaseException) -> SpecError:
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return SpecError(
        f"cannot read the access log {path}: {reason}",
        "give the path of a log file this user can read",
    )


def _opened(path: Path) -> IO[str]:
    """The file as text, through gzip if its first bytes say so. Bytes that are not UTF-8
    are replaced rather than fatal: a URL's raw bytes are no reason to stop."""
    try:
        with path.open("rb") as probe:
            compressed = probe.read(len(GZIP_MAGIC)) == GZIP_MAGIC
        if compressed:
            return gzip.open(path, "rt", encoding="utf-8", errors="replace")
        return path.open(encoding="utf-8", errors="replace")
    except OSError as error:
        raise _unreadable_file(path, error) from None


def _line_blocks(stream: IO[str], source: str) -> Iterator[list[str]]:
    """The stream's lines (without their newline) a block at a time, each cut to
    ``MAX_LINE_CHARS`` as ``readline(MAX_LINE_CHARS)`` would, the rest of a long line
    skipped, in memory bounded by the block's size. A damaged gzip file is a SpecError
    naming it."""
    carry = ""
    cut = False  # the carried line is cut: skip up to its newline
    try:
        while chunk := stream.read(BLOCK_CHARS):
            lines = chunk.split("\n")
            if len(lines) == 1:
                if not cut:
                    carry += chunk
                    if len(carry) > MAX_LINE_CHARS:
                        carry, cut = carry[:MAX_LINE_CHARS], True
                continue
            lines[0] = carry if cut else carry + lines[0]
            carry, cut = lines.pop(), False
            if len(carry) > MAX_LINE_CHARS:
                carry, cut = carry[:MAX_LINE_CHARS], True
            if max(map(len, lines)) > MAX_LINE_CHARS:
                lines = [line[:MAX_LINE_CHARS] for line in lines]
            yield lines
    except (OSError, EOFError, zlib.error) as error:
        raise SpecError(
            f"cannot read the access log {source} to its end: {error}",
            "give the file whole (a gzip file cut short or damaged: zcat what it has "
            "into a new file and give that)",
        ) from None
    if carry:
        yield [carry]


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _out_of_order(record: LogRecord, newest: float, newest_source: str) -> SpecError:
    return SpecError(
        f"the access log {record.source} starts before {newest_source} ends "
        f"({record.time - newest:+.0f} s): its first request at line {record.line} is older "
        "than the reorder window allows",
        "give the files oldest first, each once (a rotated log: access.log.2.gz "
        "access.log.1 access.log), or a wider reorder window",
    )
