"""The kinds of warning the analysis gives, each with its hint, and the warning itself.

A kind's value is the name reports print ("too-few-runs"); as a ``StrEnum`` member it
is that string too, so text and JSON show it unchanged, and ``WarningKind(name)``
reads a stored one back. A hint may name figures of the case (``{needed}``), which
``WarningKind.warn`` fills in.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class WarningKind(StrEnum):
    hint: str

    def __new__(cls, value: str, hint: str) -> WarningKind:
        member = str.__new__(cls, value)
        member._value_ = value
        member.hint = hint
        return member

    UNSTABLE = (
        "unstable",
        "pin the stack and the driver apart, stop other programs, run longer (--duration) "
        "or repeat more (--repetitions)",
    )
    ERRORS = (
        "errors",
        "a faster variant that fails requests has not won; see the error breakdown",
    )
    DRIVER_SATURATED = (
        "driver-saturated",
        "give the driver more CPUs (--driver-cpus) or use a lighter driver",
    )
    DRIVER_BOTTLENECK = (
        "driver-bottleneck",
        "spread the load driver over at least {needed} processes ({how}), each with a CPU "
        "of its own (--driver-cpus), or over more machines",
    )
    UNEVEN_WORKERS = (
        "uneven-workers",
        "read the per-start figures (runs.csv) before trusting one start; measure "
        "more starts (--precision, --budget)",
    )
    NEIGHBOURS = (
        "neighbours",
        "stop other programs while measuring; as root servelab also favours its own "
        "processes (leave out --no-cpu-priority)",
    )
    TOO_FEW_RUNS = ("too-few-runs", "repeat with --repetitions {needed}")
    REPLAY_NOT_KEPT = ("replay-not-kept", "{fix}")  # the sender's or the stack's
    CLOSED_LOOP = (
        "closed-loop",
        "for user-facing latency use the open model (a fixed arrival rate)",
    )
    MACHINE_SPEED = (
        "machine-speed",
        "a virtual machine's host or CPU frequency scaling: measure each run in "
        "interleaved slices (--slices 5), repeat more, or use a quieter machine",
    )
    NOT_CPU_BOUND = (
        "not-cpu-bound",
        "the stacks were measured in turns instead (requests/s of each alone); for a "
        "per-CPU comparison give the app enough workers and threads to keep its CPU busy",
    )
    SHARED_CPUS = (
        "shared-cpus",
        "pin them apart with --stack-cpus/--driver-cpus (the default on 2+ CPUs)",
    )

    def warn(
        self,
        message: str,
        variant: str | None = None,
        workload: str | None = None,
        **figures: object,
    ) -> ResultWarning:
        """A warning of this kind with its hint (``figures`` fill in the hint's blanks)."""
        return ResultWarning(self, message, self.hint.format(**figures), variant, workload)


# replay-not-kept: the sender was the cause, or the stack (it failed requests; a sender
# waiting on a saturated stack falls behind too, and its own CPU is no fix then).
REPLAY_SENDER_FIX = (
    "give the sender a CPU of its own (--driver-cpus), replay at a lower speed (--speed), "
    "or split the log's routes over several runs"
)
REPLAY_STACK_FIX = (
    "the stack could not serve the log at this speed: replay it slower (--speed), give the "
    "stack more workers, or ask `servelab capacity --replay` for the speed it holds"
)


# machine-speed when the runs were measured in interleaved slices: the drift fell on
# every variant alike, so only comparing with other experiments is at risk.
MACHINE_SPEED_SLICED_HINT = "compare variants measured together, not with other experiments"


@dataclass(frozen=True)
class ResultWarning:
    kind: WarningKind
    message: str
    hint: str
    variant: str | None = None
    workload: str | None = None
