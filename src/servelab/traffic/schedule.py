"""From an access log to a replay schedule: which requests go out, and when.

Each kept request goes out at its logged time less the first one's, divided by the
speed. Most access logs stamp whole seconds; a second's requests are then spread at
random over that second (uniformly, as a Poisson process places its arrivals once their
count is known), so that a logged second of 3,000 requests is not sent as one burst.
The spreading is seeded: the same log gives the same schedule.

Access logs hold no bodies: a request whose method carries one (POST, PUT, PATCH) goes
out only when its route has a body template, else it is left out and counted, by route,
so that the answer can say what was not replayed.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote

from servelab.errors import SpecError
from servelab.traffic.records import LogRecord
from servelab.traffic.routes import route_of

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
NO_BODY = -1


def _matches(pattern: str, route: str, path: str) -> bool:
    """A route or path pattern (fnmatch: ``/items/*``) against a request's route or path."""
    return fnmatch.fnmatchcase(route, pattern) or fnmatch.fnmatchcase(path, pattern)


@dataclass(frozen=True)
class BodyTemplate:
    """The body a route's requests carry (access logs keep none)."""

    body: str
    content_type: str = "application/json"


@dataclass(frozen=True)
class ReplayFilter:
    """Which logged requests are replayed: a time window (seconds from the log's first
    request: [start, end)), route or path patterns (fnmatch: ``/items/*``,
    ``/items/{id}``), methods and status classes ("2xx") or codes ("404")."""

    start_s: float = 0.0
    end_s: float | None = None
    routes: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()

    def keeps_route(self, route: str, path: str) -> bool:
        return not self.routes or any(_matches(p, route, path) for p in self.routes)

    def keeps_status(self, status: int | None) -> bool:
        if not self.statuses:
            return True
        if status is None:
            return False
        code = str(status)
        return any(
            code == s or (len(s) == 3 and s.endswith("xx") and code[0] == s[0])
            for s in self.statuses
        )

    def check(self) -> None:
        if self.start_s < 0 or (self.end_s is not None and self.end_s <= self.start_s):
            raise SpecError(
                f"the replay window [{self.start_s:g}, {self.end_s}] s is empty or negative",
                "give it as seconds from the log's first request, start below end "
                "(e.g. --window 0:300)",
            )
        for status in self.statuses:
            if not (status.isdigit() and len(status) == 3) and not (
                len(status) == 3 and status[0].isdigit() and status[1:] == "xx"
            ):
                raise SpecError(
                    f"cannot read the status filter {status!r}", "write a code or a class: 200, 2xx"
                )


@dataclass(frozen=True)
class ScheduledRequest:
    offset_s: float  # from the schedule's start, at speed 1
    method: str
    target: str
    route: str
    body: int = NO_BODY  # index into the schedule's bodies


@dataclass(frozen=True)
class Schedule:
    """The requests to replay, in time order, and what was left out of the log and why."""

    requests: tuple[ScheduledRequest, ...]
    bodies: tuple[BodyTemplate, ...]
    duration_s: float  # of the window the requests came from, at speed 1
    read: int  # records the filter saw
    filtered_out: int  # by window, route, method or status
    no_body: Mapping[str, int] = field(default_factory=dict)  # route -> left out: no template
    whole_seconds: bool = False  # the log stamps whole seconds: requests spread within them

    @property
    def routes(self) -> Counter[str]:
        return Counter(r.route for r in self.requests)

    def mean_rate(self, speed: float = 1.0) -> float:
        return len(self.requests) / self.duration_s * speed if self.duration_s else 0.0

    def peak_rate(self, speed: float = 1.0) -> float:
        """The busiest one-second window's requests per second, at ``speed``."""
        per_second = Counter(int(r.offset_s / speed) for r in self.requests)
        return float(max(per_second.values(), default=0))

    def write(self, path: Path) -> None:
        """The sender's files: ``path`` a line per request (microseconds from the start
        at speed 1, method, target, body number; tab-separated), the bodies beside it
        (``.bodies.json``) and what the schedule is (``.json``: duration, counts)."""
        with path.open("w") as f:
            for r in self.requests:
                f.write(f"{round(r.offset_s * 1e6)}\t{r.method}\t{r.target}\t{r.body}\n")
        path.with_suffix(".bodies.json").write_text(json.dumps(
            [{"content_type": b.content_type, "body": b.body} for b in self.bodies]
        ))
        path.with_suffix(".json").write_text(json.dumps({
            "duration_s": self.duration_s, "requests": len(self.requests), "read": self.read,
            "filtered_out": self.filtered_out, "no_body": dict(self.no_body),
            "whole_seconds": self.whole_seconds, "peak_second": self.peak_rate(),
        }, indent=1))


@dataclass(frozen=True)
class ScheduleFile:
    """A written schedule as the replay driver reads it back: each request's time (speed
    1), its route counts, and the window's length."""

    due_s: tuple[float, ...]
    routes: Mapping[str, int]
    duration_s: float


@dataclass(frozen=True)
class ScheduleSize:
    """A written schedule's size without reading its requests: how many, over how long
    (at speed 1), and its busiest second's requests (what "1x" means in requests/s)."""

    requests: int
    duration_s: float
    peak_second: float

    @property
    def mean_rate(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0


def schedule_size(path: Path) -> ScheduleSize:
    meta = json.loads(path.with_suffix(".json").read_text())
    return ScheduleSize(int(meta["requests"]), float(meta["duration_s"]),
                        float(meta.get("peak_second", 0.0)))


def read_schedule_file(path: Path) -> ScheduleFile:
    due: list[float] = []
    routes: Counter[str] = Counter()
    with path.open() as f:
        for line in f:
            micros, _method, target, _body = line.rstrip("\n").split("\t")
            due.append(int(micros) / 1e6)
            routes[route_of(target.partition("?")[0])] += 1
    meta = json.loads(path.with_suffix(".json").read_text())
    return ScheduleFile(tuple(due), dict(routes), float(meta["duration_s"]))


def anonymised(target: str, salt: str = "") -> str:
    """``target`` with every query value replaced by a short stable hash of it (the same
    value gives the same token, so the replay keeps how often values repeat)."""
    path, sep, query = target.partition("?")
    if not sep:
        return target
    pairs = parse_qsl(query, keep_blank_values=True)
    tokens = [
        (key, hashlib.blake2b(f"{salt}{value}".encode(), digest_size=5).hexdigest())
        for key, value in pairs
    ]
    return path + "?" + "&".join(f"{quote(k, safe='')}={v}" for k, v in tokens)


def build_schedule(
    records: Iterable[LogRecord],
    keep: ReplayFilter = ReplayFilter(),
    bodies: Mapping[str, BodyTemplate] | None = None,
    *,
    anonymise: bool = False,
    seed: int = 0,
    max_requests: int | None = None,
) -> Schedule:
    """The schedule of ``records`` (in time order, as ``reading.read_log`` yields them).

    ``bodies`` maps route patterns (fnmatch, as the filter's) to the body their requests
    carry. ``max_requests``: a SpecError past it (a schedule is held in memory)."""
    keep.check()
    templates = list((bodies or {}).items())
    body_list = [template for _, template in templates]
    rng = random.Random(seed)
    kept: list[ScheduledRequest] = []
    no_body: Counter[str] = Counter()
    read = filtered = 0
    first: float | None = None
    whole = True
    for record in records:
        read += 1
        if first is None:
            first = record.time
        at = record.time - first
        if at < keep.start_s or (keep.end_s is not None and at >= keep.end_s):
            filtered += 1
            continue
        route = route_of(record.path)
        if (
            not keep.keeps_route(route, record.path)
            or (keep.methods and record.method not in keep.methods)
            or not keep.keeps_status(record.status)
        ):
            filtered += 1
            continue
        body = NO_BODY
        if record.method in BODY_METHODS:
            body = next(
                (i for i, (pattern, _) in enumerate(templates)
                 if _matches(pattern, route, record.path)),
                NO_BODY,
            )
            if body == NO_BODY:
                no_body[route] += 1
                continue
        whole = whole and float(record.time).is_integer()
        target = anonymised(record.target) if anonymise else record.target
        kept.append(ScheduledRequest(at - keep.start_s, record.method, target, route, body))
        if max_requests is not None and len(kept) > max_requests:
            raise SpecError(
                f"the replay holds more than {max_requests:,} requests",
                "replay a shorter window (--window) or filter routes",
            )
    if first is None:
        raise SpecError("the log holds no request to replay", "check the log file and its format")
    if whole:
        kept = _spread_within_seconds(kept, rng)
    last = kept[-1].offset_s if kept else 0.0
    end = keep.end_s - keep.start_s if keep.end_s is not None else (
        (int(last) + 1) if whole else last
    )
    return Schedule(
        tuple(kept), tuple(body_list), duration_s=max(end, 1e-9) if kept else 0.0,
        read=read, filtered_out=filtered, no_body=dict(no_body), whole_seconds=whole,
    )


def _spread_within_seconds(
    requests: Sequence[ScheduledRequest], rng: random.Random
) -> list[ScheduledRequest]:
    """Each whole second's requests at sorted uniform times within that second."""
    out: list[ScheduledRequest] = []
    at = 0
    while at < len(requests):
        second = requests[at].offset_s
        end = at
        while end < len(requests) and requests[end].offset_s == second:
            end += 1
        offsets = sorted(second + rng.random() for _ in range(end - at))
        out.extend(
            ScheduledRequest(o, r.method, r.target, r.route, r.body)
            for o, r in zip(offsets, requests[at:end], strict=True)
        )
        at = end
    return out
