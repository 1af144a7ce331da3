"""The open model's schedule as servelab's built-in Locust scenario keeps it, and the rate
a process sent at: pure, so that the locustfiles (which Locust loads, with gevent's
monkey-patching) and the tests share one copy."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Schedule:
    """One process's fixed-rate schedule, served as oha serves its own: evenly spaced send
    times, each taken by the next User that is free, so that a slow answer holds only its
    own User and the schedule goes on. A User that takes a time already past (every User
    was busy) sends at once, its latency counted from that time."""

    offset: float  # in [0, 1): where in its first period the first send falls
    length_s: float = 0.0  # the schedule's own length from its first claim; 0: unbounded
    next_at: float | None = None
    ends_at: float = float("inf")

    def claim(self, now: float, period_s: float) -> float:
        """The next send time (from ``now`` on the first claim), ``period_s`` after the
        one before."""
        if self.next_at is None:
            self.next_at = now + self.offset * period_s
            if self.length_s > 0:
                self.ends_at = now + self.length_s
        at = self.next_at
        self.next_at = at + period_s
        return at

    def sends(self, at: float) -> bool:
        """Whether a claimed time is within the schedule's length. A process's sends are
        bounded by its own clock, not by when the stop message reaches it: a worker on
        another machine that hears it late must not send beyond the trial's length."""
        return at < self.ends_at


def send_rate(sent: list[float] | tuple[float, float, float]) -> float:
    """The rate one process sent at, from ``[requests, first send, last send]``: its
    requests over the time between its first and last (as oha's per-request start times
    give it). 0 for fewer than two."""
    count, first, last = sent
    return (count - 1) / (last - first) if count >= 2 and last > first else 0.0
