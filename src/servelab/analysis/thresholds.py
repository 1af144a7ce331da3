"""Regression thresholds (``servelab check --fail-if "rps < -5%"``), and how a comparison
decides one: crossed, held, or not yet known.

A threshold is *crossed* when the whole 95 % interval of the change lies beyond it (a
significant change beyond the limit), *held* when the whole interval lies on the good
side, and *inconclusive* while the interval straddles the limit: more measuring may
decide it. Error counts are not estimated: any run's errors count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from servelab.analysis.stats import Comparison

# The syntax lives with the model (an experiment's [stopping] thresholds are checked as
# they are read); deciding one lives here.
from servelab.config.thresholds import DEFAULT_THRESHOLDS as DEFAULT_THRESHOLDS
from servelab.config.thresholds import METRIC_NAMES as METRIC_NAMES
from servelab.config.thresholds import RELATIVE as RELATIVE
from servelab.config.thresholds import Threshold as Threshold
from servelab.config.thresholds import parse_threshold as parse_threshold

State = Literal["crossed", "held", "inconclusive"]

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
