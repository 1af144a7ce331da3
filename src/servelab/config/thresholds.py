"""Regression thresholds as users write them (``servelab check --fail-if "rps < -5%"``,
an experiment's ``[stopping] thresholds``): the syntax and its metrics. How a comparison
decides one: servelab.analysis.thresholds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# The names users write, and the metric each means (servelab.analysis.metrics.METRICS).
METRIC_NAMES: dict[str, str] = {
    "rps": "rps",
    "ok_rps": "ok_rps",
    "latency": "latency_mean_ms",
    "mean": "latency_mean_ms",
    "p99": "latency_p99_ms",
    "errors": "errors",
    # Requests per CPU second of the stack: the inverse of its CPU per request, what a
    # change of the app's code moves even where requests/s moves less (a stack that
    # leaves its CPU idle part of the time).
    "rps_per_cpu": "rps_per_cpu",
    # The app's instructions per request, counted under valgrind with no load
    # (servelab.measuring.instructions): what this machine's speed does not move.
    "instructions": "instructions",
}
# Metrics judged on a relative change (percent of the baseline); the rest on a count.
RELATIVE = {"rps", "ok_rps", "latency_mean_ms", "latency_p99_ms", "rps_per_cpu", "instructions"}
# Metrics counted apart from any load (check and bisect only): a check names them alone.
COUNTED = {"instructions"}
DEFAULT_THRESHOLDS = ("rps < -5%", "errors > 0")
# A replayed access log sends the log's own rate whatever the app: its latency is judged.
REPLAY_THRESHOLDS = ("p99 > +10%", "errors > 0")

_SYNTAX = re.compile(
    r"\s*(?P<name>[a-z_0-9]+)\s*(?P<op><|>)\s*(?P<value>[+-]?\d+(?:\.\d+)?)\s*(?P<pct>%?)\s*"
)
_EXAMPLES = "e.g. 'rps < -5%', 'p99 > +10%', 'errors > 0'"


@dataclass(frozen=True)
class Threshold:
    """``metric op limit``: the candidate fails when its change (percent of the baseline,
    for a relative metric; else its count) is beyond ``limit`` in the direction ``op``."""

    text: str  # as the user wrote it, normalised: "rps < -5%"
    metric: str  # a key of analysis.metrics.METRICS
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
