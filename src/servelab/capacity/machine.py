"""A capacity trial's start waits while the machine itself runs slow.

A trial's answer is absolute (did this rate hold?), so a trial started while the machine
runs at half its speed answers for that slow moment, not for the stack: on this
project's 2-CPU VM (`benchmarks/capacity.py steady`, the seed's FastAPI stack, 40 trials
at 1,450 req/s on fresh starts, docs/validation/capacity.md) the fixed CPU loop probed before each
start read 43,000-49,000 units/s, except in dips to 25,000-27,000 that lasted about 45 s;
4 of the 5 trials started in a dip broke the SLO, against 8 of the other 35. Before each
start the speed is probed (observe.neighbours.cpu_speed, on the stack's CPU, the stack
not running); below SLOW_SHARE of the usual speed (the median of the last USUAL_OF
starts'), the start waits and probes again every PROBE_EVERY_S, for at most MAX_WAIT_S
(--machine-wait) and what the search's budget leaves for waiting (``run``); a longer dip
is measured anyway, and the trial says it started slow.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

SLOW_SHARE = 0.85  # the probe's own rounds vary about +-7 % here
USUAL_OF = 9  # a lasting change of the machine's speed becomes the usual one
MIN_USUAL = 3  # fewer starts probed: no usual speed yet, no waiting
PROBE_EVERY_S = 5.0
MAX_WAIT_S = 60.0


@dataclass(frozen=True)
class StartSpeed:
    """The machine's speed when a start began, how long it waited for it, and the usual
    speed it was held against (None: not known yet, or not probed)."""

    speed: float | None
    waited_s: float = 0.0
    usual: float | None = None

    @property
    def slow(self) -> bool:
        """Started below SLOW_SHARE of the usual speed (it waited as long as allowed)."""
        return (
            self.speed is not None and self.usual is not None
            and self.speed < SLOW_SHARE * self.usual
        )


@dataclass
class MachineSpeed:
    """The speeds of a capacity run's starts (every variant's: the machine is one)."""

    probe: Callable[[], float | None]
    sleep: Callable[[float], None]
    max_wait_s: float = MAX_WAIT_S
    speeds: list[float] = field(default_factory=list)

    def usual(self) -> float | None:
        if len(self.speeds) < MIN_USUAL:
            return None
        return statistics.median(self.speeds[-USUAL_OF:])

    def before_start(self, limit_s: float | None = None) -> StartSpeed:
        """Probed, and probed again after a wait while slow (see the module), for at most
        ``max_wait_s`` and ``limit_s`` (what a search's budget leaves for waiting)."""
        usual = self.usual()
        speed = self.probe()
        waited = 0.0
        most = self.max_wait_s if limit_s is None else min(self.max_wait_s, limit_s)
        while (
            speed is not None and usual is not None and speed < SLOW_SHARE * usual
            and waited + PROBE_EVERY_S <= most
        ):
            self.sleep(PROBE_EVERY_S)
            waited += PROBE_EVERY_S
            speed = self.probe()
        if speed is not None:
            self.speeds.append(speed)
        return StartSpeed(speed, waited, usual)
