"""Regression thresholds (``servelab check --fail-if "rps < -5%"``), and how a comparison
decides one: crossed, held, or not yet known.

A threshold is *crossed* when the whole 95 % interval of the change lies beyond it (a
significant change beyond the limit), *held* when the whole interval lies on the good
side, and *inconclusive* while the interval straddles the limit: more measuring may
decide it. Error counts are not estimated: any run's errors count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from servelab.analysis.stats import Comparison

State = Literal["crossed", "held", "inconclusive"]

# The names users write, and the metric each means (servelab.analysis.analyze.METRICS).
METRIC_NAMES: dict[str, str] = {
    "rps": "rps",
    "ok_rps": "ok_rps",
    "latency": "latency_mean_ms",
    "mean": "latency_mean_ms",
    "p99": "latency_p99_ms",
    "errors": "errors",
}
# Metrics judged on a relative change (percent of the baseline); the rest on a count.
RELATIVE = {"rps", "ok_rps", "latency_mean_ms", "latency_p99_ms"}
DEFAULT_THRESHOLDS = ("rps < -5%", "errors > 0")

_SYNTAX = re.compile(
    r"\s*(?P<name>[a-z_0-9]+)\s*(?P<op><|>)\s*(?P<value>[+-]?\d+(?:\.\d+)?)\s*(?P<pct>%?)\s*"
)
_EXAMPLES = "e.g. 'rps < -5%', 'p99 > +10%', 'errors > 0'"


@dataclass(frozen=True)
class Threshold:
    """``metric op limit``: the candidate fails when its change (percent of the baseline,
    for a relative metric; else its count) is beyond ``limit`` in the direction ``op``."""

    text: str  # as the user wrote it, normalised: "rps < -5%"
    metric: str  # a key of analysis.analyze.METRICS
    op: Literal["<", ">"]
    limit: float

    @property
    def relative(self) -> bool:
        return self.metric in RELATIVE


def parse_threshold(text: str) -> Threshold:
    """ValueError (naming the syntax and the metrics) for what is not a threshold."""
    found = _SYNTAX.fullmatch(text.lower())
    if found is None:
        raise ValueError(f"invalid threshold {text!r}: write METRIC < or > VALUE, {_EXAMPLES}")
    name, op, value, pct = found["name"], found["op"], float(found["value"]), found["pct"]
    if name not in METRIC_NAMES:
        raise ValueError(
            f"unknown metric {name!r} in threshold {text!r}: use one of "
            f"{', '.join(METRIC_NAMES)}"
        )
    metric = METRIC_NAMES[name]
    if metric in RELATIVE and not pct:
        raise ValueError(
            f"threshold {text!r}: {name} is judged on its change, give a percentage "
            f"({name} {op} {value:+g}%)"
        )
    if metric not in RELATIVE and pct:
        raise ValueError(f"threshold {text!r}: {name} is a count, give no % ({name} {op} 0)")
    if metric not in RELATIVE and op == "<":
        raise ValueError(f"threshold {text!r}: a failing count is one above a limit ({name} > 0)")
    normal = f"{name} {op} {value:+g}%" if pct else f"{name} {op} {value:g}"
    return Threshold(normal, metric, op, value)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Judgement:
    """What one comparison says about one threshold."""

    threshold: Threshold
    workload: str
    state: State
    observed: float | None  # the change in percent, or the count
    interval_pct: tuple[float, float] | None  # for a relative metric
    reason: str


def judge(
    threshold: Threshold, comparison: Comparison | None, errors: float, workload: str = ""
) -> Judgement:
    """Decide ``threshold`` from ``comparison`` (candidate vs baseline; relative metrics)
    or from the candidate's ``errors`` (the count metric)."""
    if not threshold.relative:
        crossed = errors > threshold.limit
        return Judgement(
            threshold, workload, "crossed" if crossed else "held", errors, None,
            f"{errors:g} {'>' if crossed else '≤'} {threshold.limit:g}",
        )
    bounds = None if comparison is None else comparison.interval_pct
    change = None if comparison is None else comparison.difference_pct
    if bounds is None:
        return Judgement(threshold, workload, "inconclusive", change, None,
                         "no interval yet (too few runs)")
    low, high = bounds
    limit = threshold.limit
    beyond = high < limit if threshold.op == "<" else low > limit
    within = low >= limit if threshold.op == "<" else high <= limit
    span = f"95 % interval {low:+.1f} % … {high:+.1f} %"
    if beyond:
        return Judgement(threshold, workload, "crossed", change, bounds,
                         f"{span}, entirely beyond {limit:+g} %")
    if within:
        return Judgement(threshold, workload, "held", change, bounds,
                         f"{span}, entirely on the good side of {limit:+g} %")
    return Judgement(threshold, workload, "inconclusive", change, bounds,
                     f"{span} straddles {limit:+g} %")


def distance_to_decide(threshold: Threshold, comparison: Comparison | None) -> float | None:
    """The interval's half-width (percent) that would decide ``threshold``, at the change
    measured so far: its distance to the limit (None: nothing to go on)."""
    if not threshold.relative or comparison is None or comparison.difference_pct is None:
        return None
    return abs(comparison.difference_pct - threshold.limit)


# 2-5 are servelab's errors (servelab.errors): inconclusive is none of them.
EXIT_PASS, EXIT_FAIL, EXIT_INCONCLUSIVE = 0, 1, 10


def overall(judgements: Sequence[Judgement]) -> State:
    """Crossed if any is; else inconclusive if any is; else held."""
    states = {j.state for j in judgements}
    if "crossed" in states:
        return "crossed"
    return "inconclusive" if "inconclusive" in states else "held"


def exit_code(state: State, inconclusive: Literal["pass", "fail"] = "fail") -> int:
    """0 held, 1 crossed, 10 inconclusive (``inconclusive="pass"``: 0)."""
    if state == "crossed":
        return EXIT_FAIL
    if state == "inconclusive":
        return EXIT_PASS if inconclusive == "pass" else EXIT_INCONCLUSIVE
    return EXIT_PASS
