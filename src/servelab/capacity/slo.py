"""A service-level objective for the capacity search: latency bounds and an error ratio,
parsed from one string such as ``p99<100ms,errors<0.1%``."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from servelab.errors import SpecError

# The latency statistics a bound may name, and the percentile each one is (None: the mean).
LATENCY_STATS: Mapping[str, float | None] = {
    "p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9, "mean": None,
}  # fmt: skip
UNITS_MS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}
DEFAULT_MAX_ERROR_RATIO = 0.001  # "almost nothing fails": one request in a thousand
SLO_EXAMPLE = "--slo 'p99<100ms,errors<0.1%'"

_TERM = re.compile(r"^\s*([a-z0-9]+)\s*<\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*([a-z%]*)\s*$")


@dataclass(frozen=True)
class LatencyBound:
    stat: str  # a key of LATENCY_STATS
    limit_ms: float

    def __str__(self) -> str:
        return f"{self.stat} < {self.limit_ms:g} ms"


@dataclass(frozen=True)
class Slo:
    """Every latency bound holds and at most ``max_error_ratio`` of the requests fail."""

    bounds: tuple[LatencyBound, ...]
    max_error_ratio: float = DEFAULT_MAX_ERROR_RATIO

    def __str__(self) -> str:
        return ", ".join([*map(str, self.bounds), f"errors < {100 * self.max_error_ratio:g} %"])

    def margin(self, latencies_ms: Mapping[str, float]) -> float:
        """How far the latencies are inside the bounds: the smallest limit / measured over
        the bounds (above 1: held; below 1: broken; inf for a measured 0)."""
        return min(
            math.inf if latencies_ms[b.stat] <= 0 else b.limit_ms / latencies_ms[b.stat]
            for b in self.bounds
        )


def parse_slo(text: str) -> Slo:
    """``p99<100ms,errors<0.1%`` -> Slo; SpecError (one line, with the fix) otherwise."""
    bounds: list[LatencyBound] = []
    max_error_ratio: float | None = None
    terms = [t for t in text.lower().split(",") if t.strip()]
    if not terms:
        raise SpecError("the SLO is empty", f"e.g. {SLO_EXAMPLE}")
    for term in terms:
        match = _TERM.match(term)
        if match is None:
            raise SpecError(
                f"cannot read {term.strip()!r} in the SLO {text!r} (write NAME<VALUE)",
                f"e.g. {SLO_EXAMPLE}; names: {', '.join(LATENCY_STATS)}, errors",
            )
        name, number, unit = match.group(1), float(match.group(2)), match.group(3)
        if name == "errors":
            if unit not in ("%", ""):
                raise SpecError(
                    f"the SLO's error bound {term.strip()!r} is a ratio", "e.g. errors<0.1%"
                )
            max_error_ratio = number / 100 if unit == "%" else number
            if not 0 <= max_error_ratio < 1:
                raise SpecError(
                    f"the SLO's error bound {term.strip()!r} is not below 100 %",
                    "e.g. errors<0.1%",
                )
            continue
        if name not in LATENCY_STATS:
            raise SpecError(
                f"the SLO names {name!r}, which is no latency statistic",
                f"use one of {', '.join(LATENCY_STATS)} (e.g. p99<100ms), or errors<0.1%",
            )
        if unit not in UNITS_MS:
            raise SpecError(
                f"the SLO's bound {term.strip()!r} has no time unit",
                f"write it in {', '.join(UNITS_MS)} (e.g. {name}<100ms)",
            )
        limit = number * UNITS_MS[unit]
        if not limit > 0:
            raise SpecError(f"the SLO's bound {term.strip()!r} must be positive", "e.g. p99<100ms")
        bounds.append(LatencyBound(name, limit))
    if not bounds:
        raise SpecError(f"the SLO {text!r} bounds no latency", f"e.g. {SLO_EXAMPLE}")
    return Slo(
        tuple(bounds),
        DEFAULT_MAX_ERROR_RATIO if max_error_ratio is None else max_error_ratio,
    )


def latency_stats(latencies_ms: Sequence[float], stats: Sequence[str]) -> dict[str, float]:
    """The named statistics of one trial's answered requests (0 where none was answered);
    percentiles by nearest rank, as every record's (``results.records.percentile``)."""
    import statistics

    from servelab.results.records import percentile

    if not latencies_ms:
        return dict.fromkeys(stats, 0.0)
    ordered = sorted(latencies_ms)
    out = {}
    for stat in stats:
        pct = LATENCY_STATS[stat]
        out[stat] = statistics.fmean(ordered) if pct is None else percentile(ordered, pct)
    return out
