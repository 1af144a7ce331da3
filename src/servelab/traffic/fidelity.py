"""How faithfully a replay kept its schedule: figures every replay result states.

- the send lag: how late each request went out against its intended time (p50, p99);
- the mix: each route's share of the requests sent against its share of the schedule;
- the inter-arrival times sent against those scheduled, as a Kolmogorov-Smirnov distance
  (0: the same distribution; 1: disjoint).

A replay whose driver fell behind (lag p99 above ``MAX_LAG_P99_MS``) or left requests
unsent is *not kept*: its latencies are the driver's as much as the stack's, and it gets
no verdict. Latency is counted from each request's intended time (lag + the request's
own latency), so a stack that slows the sender down is not let off (coordinated
omission).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Above this send lag at p99 a replay is not kept: the schedule's own gaps at 5,000
# req/s are 0.2 ms, and an SLO such as p99 < 100 ms must not be eaten by the sender.
MAX_LAG_P99_MS = 10.0
MAX_UNSENT_SHARE = 0.001


@dataclass(frozen=True)
class SentRequest:
    """One request as the sender did it (seconds from the replay's start)."""

    seq: int  # the n-th sent, due at the schedule's n-th time
    sent_s: float
    latency_s: float
    status: int  # 0: no answer
    method: str
    target: str
    route: str
    error: str = ""


@dataclass(frozen=True)
class RouteShare:
    route: str
    scheduled: float  # share of the schedule
    sent: float  # share of what was sent

    @property
    def error_points(self) -> float:
        """sent - scheduled, in percentage points."""
        return 100 * (self.sent - self.scheduled)


@dataclass(frozen=True)
class Fidelity:
    scheduled: int
    sent: int
    lag_p50_ms: float
    lag_p99_ms: float
    lag_max_ms: float
    mix: tuple[RouteShare, ...]
    ks_distance: float  # of the inter-arrival times, sent vs scheduled
    # The most requests the sender had out at once (sent, not yet answered or failed):
    # at its connection cap, a sender that fell behind was waiting on the stack.
    peak_in_flight: int = 0

    @property
    def max_mix_error_points(self) -> float:
        return max((abs(r.error_points) for r in self.mix), default=0.0)

    @property
    def problems(self) -> tuple[str, ...]:
        """Why the replay was not kept (empty: kept)."""
        found = []
        if self.lag_p99_ms > MAX_LAG_P99_MS:
            found.append(
                f"the sender fell behind its schedule: send lag p99 {self.lag_p99_ms:,.1f} ms "
                f"(above {MAX_LAG_P99_MS:g} ms)"
            )
        if self.scheduled and (self.scheduled - self.sent) / self.scheduled > MAX_UNSENT_SHARE:
            found.append(f"{self.scheduled - self.sent:,} of {self.scheduled:,} requests unsent")
        return tuple(found)

    @property
    def kept(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        return (
            f"send lag p50 {self.lag_p50_ms:.2f} ms, p99 {self.lag_p99_ms:.2f} ms; mix within "
            f"{self.max_mix_error_points:.2f} points per route; inter-arrival KS distance "
            f"{self.ks_distance:.3f}"
        )


def percentile(ordered: Sequence[float], pct: float) -> float:
    """Nearest rank, as every record's percentiles (0 for none)."""
    if not ordered:
        return 0.0
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[min(len(ordered), int(rank)) - 1]


def peak_in_flight(sent: Sequence[SentRequest]) -> int:
    """The most requests out at once: each from its send to its answer (or failure); one
    ending as another is sent counts as ended."""
    starts = sorted(r.sent_s for r in sent)
    ends = sorted(r.sent_s + r.latency_s for r in sent)
    peak = out = j = 0
    for start in starts:
        while j < len(ends) and ends[j] <= start:
            j += 1
            out -= 1
        out += 1
        peak = max(peak, out)
    return peak


def ks_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical
    distribution functions of ``a`` and ``b`` (scipy's ``ks_2samp``)."""
    if not a or not b:
        return 0.0
    from scipy import stats

    # The asymptotic distribution: samples of thousands, where the exact one gives up.
    return float(stats.ks_2samp(a, b, method="asymp").statistic)


def gaps(times: Sequence[float]) -> list[float]:
    ordered = sorted(times)
    return [b - a for a, b in itertools.pairwise(ordered)]


def measure_fidelity(
    due_s: Sequence[float], scheduled_routes: Mapping[str, int], sent: Sequence[SentRequest],
    speed: float = 1.0,
) -> Fidelity:
    """The fidelity of a replay: ``due_s`` the schedule's times at speed 1 (in order),
    ``scheduled_routes`` its requests per route, ``sent`` what the sender did."""
    lags = sorted(
        max(0.0, r.sent_s - due_s[r.seq] / speed) * 1000 for r in sent if r.seq < len(due_s)
    )
    total_scheduled = sum(scheduled_routes.values())
    by_route = Counter(r.route for r in sent)
    routes = sorted(set(scheduled_routes) | set(by_route))
    mix = tuple(
        RouteShare(
            route,
            scheduled_routes.get(route, 0) / total_scheduled if total_scheduled else 0.0,
            by_route[route] / len(sent) if sent else 0.0,
        )
        for route in routes
    )
    return Fidelity(
        scheduled=len(due_s), sent=len(sent),
        lag_p50_ms=percentile(lags, 50), lag_p99_ms=percentile(lags, 99),
        lag_max_ms=lags[-1] if lags else 0.0, mix=mix,
        ks_distance=ks_distance(
            gaps([r.sent_s for r in sent]), gaps([d / speed for d in due_s])
        ),
        peak_in_flight=peak_in_flight(sent),
    )
