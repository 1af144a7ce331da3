"""What a log's traffic looks like, in one pass over its records and bounded memory:
how much, how fast on average and at its busiest second and minute, the rate over time,
and the mix of routes, methods and status codes, which a replay has to reproduce.

Records arrive in time order (``servelab.traffic.reading`` sorts what a log wrote a
little out of order), so the busiest second and minute are found on the fly, keeping
only the last few buckets open. The rate series is kept per second while the log spans
at most two hours, then folded into minutes (and past five days, hours): a month of log
costs as much as a day. The mix keeps at most ``MAX_ROUTES`` routes; the requests of
any route first seen after that count under ``OTHER_ROUTES``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from servelab.traffic.records import LogRecord
from servelab.traffic.routes import RouteTemplate, route_of

MAX_ROUTES = 500
ROUTES_KEPT = 100_000  # paths whose route is remembered (forgotten all at once when full)
PATHS_COUNTED = 1000  # distinct paths counted a route; past it, "1,000 or more"
OTHER_ROUTES = "(other routes)"
# The series' step and the longest span it is kept at: 7,200 points at most each.
SERIES_STEPS: tuple[tuple[int, float], ...] = ((1, 2 * 3600.0), (60, 5 * 86400.0),
                                               (3600, math.inf))
# A record this many seconds older than the newest still counts in its second's peak
# (more than the reader's reordering window of 5 s); an older one counts everywhere else.
LATE_S = 30


@dataclass(frozen=True)
class Peak:
    """The busiest bucket (a second or a minute, aligned on the clock): its requests and
    when it started (epoch seconds, UTC)."""

    requests: int
    at: float


@dataclass(frozen=True)
class RouteShare:
    """One route of the mix: its requests, their share of all, its methods (most used
    first), and how many distinct paths it holds (counted up to ``PATHS_COUNTED``: past
    that, ``PATHS_COUNTED``)."""

    route: str
    requests: int
    share: float
    methods: tuple[tuple[str, int], ...]
    paths: int = 1


@dataclass(frozen=True)
class TrafficSummary:
    """A log's traffic. ``duration_s`` counts the whole seconds from the first record's
    to the last's, both included, so that ``mean_rate`` is requests per second of log.
    ``series`` is (start, requests per second) every ``series_step_s`` seconds, from the
    first bucket to the last, quiet ones included."""

    requests: int
    first_time: float | None
    last_time: float | None
    duration_s: float
    mean_rate: float
    peak_second: Peak | None
    peak_minute: Peak | None
    routes: tuple[RouteShare, ...]  # most requested first, OTHER_ROUTES last
    methods: tuple[tuple[str, int], ...]  # most used first
    statuses: tuple[tuple[int | None, int], ...]  # by code; None (not logged) last
    series_step_s: int
    series: tuple[tuple[float, float], ...]

    @property
    def mean_per_minute(self) -> float:
        return self.mean_rate * 60

    def as_json(self) -> dict[str, Any]:
        """The summary as traffic.json keeps it (status codes as strings, "-" when the
        log had none)."""
        def peak(found: Peak | None) -> dict[str, float] | None:
            return None if found is None else {"requests": found.requests, "at": found.at}

        return {
            "requests": self.requests,
            "first_time": self.first_time,
            "last_time": self.last_time,
            "duration_s": self.duration_s,
            "mean_rate": self.mean_rate,
            "mean_per_minute": self.mean_per_minute,
            "peak_second": peak(self.peak_second),
            "peak_minute": peak(self.peak_minute),
            "routes": [
                {"route": r.route, "requests": r.requests, "share": r.share,
                 "methods": dict(r.methods), "paths": r.paths}
                for r in self.routes
            ],
            "methods": dict(self.methods),
            "statuses": {"-" if code is None else str(code): n for code, n in self.statuses},
            "series_step_s": self.series_step_s,
            "series": [list(point) for point in self.series],
        }


class _PeakFinder:
    """The busiest clock-aligned bucket of ``width`` seconds, found as records arrive,
    with the buckets of the last LATE_S seconds open."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.open: dict[int, int] = {}
        self.horizon = -math.inf  # buckets before it are closed
        self.best: tuple[int, int] | None = None  # (requests, bucket)

    def add(self, time: float, requests: int = 1) -> None:
        bucket = math.floor(time / self.width)
        if bucket < self.horizon:
            return  # its bucket is closed: counted in the totals and the series only
        self.open[bucket] = self.open.get(bucket, 0) + requests
        horizon = math.floor((time - LATE_S) / self.width)
        if horizon > self.horizon:
            self.horizon = horizon
            for closed in [b for b in self.open if b < horizon]:
                self._close(closed)

    def _close(self, bucket: int) -> None:
        requests = self.open.pop(bucket)
        if self.best is None or (requests, -bucket) > (self.best[0], -self.best[1]):
            self.best = (requests, bucket)

    def peak(self) -> Peak | None:
        for bucket in list(self.open):
            self._close(bucket)
        return None if self.best is None else Peak(self.best[0], float(self.best[1] * self.width))


class _Series:
    """Requests per bucket, the bucket widened (and the counts folded) as the span
    grows past SERIES_STEPS' bounds."""

    def __init__(self) -> None:
        self.level = 0
        self.counts: Counter[int] = Counter()

    @property
    def step(self) -> int:
        return SERIES_STEPS[self.level][0]

    def add(self, time: float, first: float, last: float, requests: int = 1) -> None:
        while last - first > SERIES_STEPS[self.level][1]:
            self.level += 1
            folded: Counter[int] = Counter()
            for bucket, n in self.counts.items():
                folded[math.floor(bucket * SERIES_STEPS[self.level - 1][0] / self.step)] += n
            self.counts = folded
        self.counts[math.floor(time / self.step)] += requests

    def points(self) -> tuple[tuple[float, float], ...]:
        if not self.counts:
            return ()
        step = self.step
        return tuple(
            (float(bucket * step), self.counts.get(bucket, 0) / step)
            for bucket in range(min(self.counts), max(self.counts) + 1)
        )


def describe(
    records: Iterable[LogRecord], *, max_routes: int = MAX_ROUTES,
    templates: Sequence[RouteTemplate] = (),
) -> TrafficSummary:
    """The summary of ``records`` (in time order, or nearly), read once; ``templates``
    name routes before the heuristics do.

    Records of one time (a busy log's lines of one second) are counted as one run, and a
    path's route is worked out once (up to ``ROUTES_KEPT`` paths), so that describing costs
    a fraction of reading."""
    requests = 0
    first = last = math.nan
    seconds, minutes = _PeakFinder(1), _PeakFinder(60)
    series = _Series()
    admitted: set[str] = set()  # routes in the mix, OTHER_ROUTES too once used
    route_of_path: dict[str, str] = {}
    tally: dict[tuple[str, str, int | None], int] = {}  # (route, method, status): requests
    paths: dict[str, set[int]] = {}  # a route's distinct paths (their hashes), bounded
    run_time, run = math.nan, 0

    def count_run() -> None:
        nonlocal requests, first, last
        requests += run
        first = run_time if requests == run else min(first, run_time)
        last = run_time if requests == run else max(last, run_time)
        seconds.add(run_time, run)
        minutes.add(run_time, run)
        series.add(run_time, first, last, run)

    for record in records:
        time = record[0]
        if time != run_time:
            if run:
                count_run()
            run_time, run = time, 0
        run += 1
        path = record[2].partition("?")[0]
        route = route_of_path.get(path)
        if route is None:
            route = route_of(path, templates)
            if route not in admitted and len(admitted) >= max_routes:
                route = OTHER_ROUTES
            admitted.add(route)
            seen = paths.setdefault(route, set())
            if len(seen) < PATHS_COUNTED:
                seen.add(hash(path))
            if len(route_of_path) >= ROUTES_KEPT:
                route_of_path.clear()
            route_of_path[path] = route
        key = (route, record[1], record[3])
        tally[key] = tally.get(key, 0) + 1
    if run:
        count_run()
    routes: dict[str, Counter[str]] = {}
    methods: Counter[str] = Counter()
    statuses: Counter[int | None] = Counter()
    for (route, method, status), n in tally.items():
        routes.setdefault(route, Counter())[method] += n
        methods[method] += n
        statuses[status] += n
    if not requests:
        return TrafficSummary(0, None, None, 0.0, 0.0, None, None, (), (), (), 1, ())
    duration = float(math.floor(last) - math.floor(first) + 1)
    shares = sorted(
        (RouteShare(route, sum(by_method.values()), sum(by_method.values()) / requests,
                    tuple(by_method.most_common()), len(paths[route]))
         for route, by_method in routes.items()),
        key=lambda r: (r.route == OTHER_ROUTES, -r.requests, r.route),
    )
    return TrafficSummary(
        requests=requests,
        first_time=first,
        last_time=last,
        duration_s=duration,
        mean_rate=requests / duration,
        peak_second=seconds.peak(),
        peak_minute=minutes.peak(),
        routes=tuple(shares),
        methods=tuple(sorted(methods.items(), key=lambda kv: (-kv[1], kv[0]))),
        statuses=tuple(sorted(statuses.items(),
                              key=lambda kv: (kv[0] is None, kv[0] or 0))),
        series_step_s=series.step,
        series=series.points(),
    )
