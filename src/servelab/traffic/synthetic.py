"""Access logs as a busy site writes them, for the built-in apps: to try a replay, or
show what ``servelab traffic`` says, without a production log at hand.

Real traffic is not a steady rate: it follows the day (a night trough, an afternoon
peak), it bursts (a link shared, a retry storm: a few seconds at several times the
rate), and a few routes and a few ids get most of the requests (a Zipf law). So:

- the rate follows a smooth day/night curve, the whole day compressed into the log's
  duration (``daily="compressed"``), or the start's own clock (``"clock"``), or none
  (``"off"``);
- bursts of ``BURST_SECONDS`` at ``BURST_FACTOR`` times the rate start as a Poisson
  process, one every ``burst_every_s`` on average;
- arrivals are Poisson at the instantaneous rate (exponential gaps, drawn by thinning),
  scaled so that the whole log's mean is ``mean_rate``;
- routes, and ids within a route, are drawn by Zipf weights (the first listed most);
- lines are the combined format (the default of most web servers), status 200, with
  the sizes the app answers and a few clients' addresses and user agents.

Everything comes from ``seed``: the same arguments give the same lines.
"""

from __future__ import annotations

import itertools
import math
import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from servelab.errors import SpecError

DAILY = ("compressed", "clock", "off")
DEFAULT_START = datetime(2024, 5, 6, tzinfo=UTC)  # a Monday, midnight
BURST_SECONDS = (2.0, 6.0)  # a burst's length, uniform between
BURST_FACTOR = (3.0, 5.0)  # the rate during a burst, times the curve's
ROUTE_ZIPF = 1.0  # the exponent of the routes' weights
ID_ZIPF = 1.1  # and of the ids' within a route
CLIENTS = 400
MAX_LINES = 100_000_000  # expected lines; more is a mistake of units
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun",
          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")  # %b is the locale's
USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.4 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
    "okhttp/4.12.0",
    "python-requests/2.31.0",
    "curl/8.5.0",
)


@dataclass(frozen=True)
class SyntheticRoute:
    """A route of an app: its method, the targets its ids give (most requested first
    once shuffled by the seed), and the bytes its answer has, lowest to highest."""

    method: str
    targets: Callable[[random.Random], Sequence[str]]
    size: tuple[int, int]


def _books(rng: random.Random) -> list[str]:
    """Price bands over the Django app's books (500 to 6,000 cents), some paged."""
    bands = [(low, low + width) for low in range(500, 5500, 100)
             for width in (500, 1000, 2000)]
    return [f"/books/?min={low}&max={high}" + (f"&page={rng.randrange(1, 4)}"
                                               if rng.random() < 0.2 else "")
            for low, high in bands]


def _uuids(rng: random.Random, template: str, n: int) -> list[str]:
    return [template.format(uuid.UUID(int=rng.getrandbits(128), version=4))
            for _ in range(n)]


APPS: dict[str, tuple[SyntheticRoute, ...]] = {
    "django": (
        SyntheticRoute("GET", _books, (1_700, 2_300)),
        SyntheticRoute("GET", lambda rng: [f"/authors/{i}/" for i in range(1, 201)], (70, 95)),
        SyntheticRoute("GET", lambda rng: ["/health/"], (12, 12)),
    ),
    "fastapi": (
        SyntheticRoute("POST", lambda rng: ["/async/items/"], (58, 90)),
        SyntheticRoute("POST", lambda rng: ["/sync/items/"], (58, 90)),
        SyntheticRoute("GET", lambda rng: ["/health"], (15, 15)),
        SyntheticRoute("POST", lambda rng: ["/async/big_json_response/"],
                       (1_059_000, 1_059_000)),
        SyntheticRoute("POST", lambda rng: ["/sync/big_json_response/"],
                       (1_059_000, 1_059_000)),
    ),
    # It answers "ok" to any path: a shop's paths, so that the mix and the routes show.
    "sleepy": (
        SyntheticRoute("GET", lambda rng: [f"/products/{i}" for i in range(1, 2001)], (3, 3)),
        SyntheticRoute("GET", lambda rng: ["/"], (3, 3)),
        SyntheticRoute("GET", lambda rng: [f"/search?q={w}" for w in (
            "shoes", "jacket", "socks", "hat", "bag", "scarf", "boots", "gloves")], (3, 3)),
        SyntheticRoute("GET", lambda rng: _uuids(rng, "/api/v1/users/{}/orders", 500), (3, 3)),
        SyntheticRoute("POST", lambda rng: ["/api/v1/cart/items"], (3, 3)),
        SyntheticRoute("GET", lambda rng: ["/static/app.css"], (3, 3)),
        SyntheticRoute("GET", lambda rng: ["/health"], (3, 3)),
    ),
}


def day_curve(hour: float) -> float:
    """The rate at ``hour`` of the day (0-24) against the day's mean: a trough near
    4 am (about a third), the peak in the afternoon and early evening (about 1.6)."""
    return (1 + 0.55 * math.cos(2 * math.pi * (hour - 15) / 24)
            + 0.15 * math.cos(4 * math.pi * (hour - 20) / 24))


def zipf_weights(n: int, exponent: float) -> list[float]:
    """The cumulative weights of ranks 1..n, 1/rank**exponent each."""
    return list(itertools.accumulate(1 / rank ** exponent for rank in range(1, n + 1)))


def _bursts(
    rng: random.Random, duration_s: float, every_s: float
) -> list[tuple[float, float, float]]:
    """(start, end, factor) of each burst, Poisson-placed, none overlapping."""
    found = []
    t = rng.expovariate(1 / every_s)
    while t < duration_s:
        end = min(duration_s, t + rng.uniform(*BURST_SECONDS))
        found.append((t, end, rng.uniform(*BURST_FACTOR)))
        t = end + rng.expovariate(1 / every_s)
    return found


def arrival_times(
    duration_s: float, mean_rate: float, *, seed: int = 0, hour_at: Callable[[float], float],
    daily: bool = True, bursts: bool = True, burst_every_s: float = 60.0,
) -> Iterator[float]:
    """Seconds from the start, increasing: Poisson arrivals at the curve's rate
    (``hour_at(t)`` the hour of day at ``t``), times a burst's factor within one, scaled
    so that the expected mean over ``duration_s`` is ``mean_rate``."""
    rng = random.Random(f"arrivals-{seed}")
    curve = (lambda t: day_curve(hour_at(t))) if daily else (lambda t: 1.0)
    placed = _bursts(random.Random(f"bursts-{seed}"), duration_s, burst_every_s) if bursts else []
    steps = 2_000
    dt = duration_s / steps
    expected = sum(curve((i + 0.5) * dt) for i in range(steps)) * dt
    expected += sum(curve((s + e) / 2) * (factor - 1) * (e - s) for s, e, factor in placed)
    scale = mean_rate * duration_s / expected
    highest = max(curve((i + 0.5) * dt) for i in range(steps)) * 1.02  # between the points
    segments, t = [], 0.0
    for start, end, factor in placed:
        segments += [(t, start, 1.0), (start, end, factor)]
        t = end
    segments.append((t, duration_s, 1.0))
    for start, end, factor in segments:
        bound = scale * highest * factor
        t = start  # gaps are memoryless: a segment may start afresh
        while True:
            t += rng.expovariate(bound)
            if t >= end:
                break
            if rng.random() * highest < curve(t):
                yield t


def _clock(moment: datetime) -> str:
    """``06/May/2024:13:05:09 +0000``, as the combined format's time."""
    offset = moment.strftime("%z") or "+0000"
    return (f"{moment.day:02d}/{MONTHS[moment.month - 1]}/{moment.year}:"
            f"{moment:%H:%M:%S} {offset}")


def synthetic_log(
    app: str, duration_s: float, mean_rate: float, *, seed: int = 0,
    start: datetime = DEFAULT_START, bursts: bool = True, daily: str = "compressed",
    burst_every_s: float = 60.0,
) -> Iterator[str]:
    """The lines (without newlines) of ``duration_s`` seconds of ``app``'s access log at
    ``mean_rate`` requests/s on average, from ``start`` (its offset is the log's time
    zone; a naive one is UTC)."""
    check_synthetic(app, duration_s, mean_rate, daily)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    content = random.Random(f"content-{seed}")
    routes = APPS[app]
    route_weights = zipf_weights(len(routes), ROUTE_ZIPF)
    targets = []
    for route in routes:
        found = list(route.targets(content))
        content.shuffle(found)  # which ids are the popular ones
        targets.append((found, zipf_weights(len(found), ID_ZIPF)))
    clients = [(f"10.{content.randrange(256)}.{content.randrange(256)}."
                f"{content.randrange(1, 255)}", content.choice(USER_AGENTS))
               for _ in range(CLIENTS)]
    client_weights = zipf_weights(CLIENTS, 1.0)
    midnight = start.replace(hour=0, minute=0, second=0, microsecond=0)
    since_midnight = (start - midnight).total_seconds()

    def hour_at(t: float) -> float:
        if daily == "clock":
            return (since_midnight + t) / 3600 % 24
        return 24 * t / duration_s

    clocks: dict[int, str] = {}
    for t in arrival_times(duration_s, mean_rate, seed=seed, hour_at=hour_at,
                           daily=daily != "off", bursts=bursts, burst_every_s=burst_every_s):
        whole = math.floor(t)
        if whole not in clocks:
            clocks.clear()
            clocks[whole] = _clock(start + timedelta(seconds=whole))
        index = content.choices(range(len(routes)), cum_weights=route_weights)[0]
        route = routes[index]
        found, weights = targets[index]
        target = content.choices(found, cum_weights=weights)[0]
        address, agent = content.choices(clients, cum_weights=client_weights)[0]
        size = content.randint(*route.size)
        yield (f'{address} - - [{clocks[whole]}] "{route.method} {target} HTTP/1.1" 200 '
               f'{size} "-" "{agent}"')


def check_synthetic(
    app: str, duration_s: float, mean_rate: float, daily: str = "compressed"
) -> None:
    """SpecError, in the CLI's words, for what ``synthetic_log`` cannot make."""
    if app not in APPS:
        raise SpecError(f"no synthetic log for the app {app!r}",
                        f"choose one of {', '.join(sorted(APPS))}")
    if not duration_s > 0 or not math.isfinite(duration_s):
        raise SpecError(f"--duration must be positive, got {duration_s:g} s", "e.g. 10m")
    if not mean_rate > 0 or not math.isfinite(mean_rate):
        raise SpecError(f"--rate must be positive, got {mean_rate:g}", "e.g. --rate 50")
    if daily not in DAILY:
        raise SpecError(f"unknown daily curve {daily!r}", f"choose one of {', '.join(DAILY)}")
    if duration_s * mean_rate > MAX_LINES:
        raise SpecError(
            f"{duration_s * mean_rate:,.0f} lines ({mean_rate:g}/s for {duration_s:g} s) is "
            f"more than the {MAX_LINES:,} a synthetic log makes",
            "give a shorter --duration or a lower --rate",
        )


def write_synthetic_log(
    path: Path, app: str, duration_s: float, mean_rate: float, *, seed: int = 0,
    start: datetime = DEFAULT_START, bursts: bool = True, daily: str = "compressed",
    burst_every_s: float = 60.0,
) -> int:
    """Write ``synthetic_log``'s lines to ``path``, a line each; how many it wrote."""
    check_synthetic(app, duration_s, mean_rate, daily)  # before the file is opened
    written = 0
    with path.open("w", encoding="utf-8") as file:
        for line in synthetic_log(app, duration_s, mean_rate, seed=seed, start=start,
                                  bursts=bursts, daily=daily, burst_every_s=burst_every_s):
            file.write(line + "\n")
            written += 1
    return written
