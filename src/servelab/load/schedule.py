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


def count_send(sent: list[float], at: float) -> None:
    """Count a send at ``at`` in a process's ``[requests, first send, last send]``."""
    if not sent[0]:
        sent[1] = at
    sent[0] += 1
    sent[2] = at


# A replayed request as Locust's master hands it to a process: its number in the
# schedule, when it is due (microseconds at speed 1), method, target, body number
# (-1: none), route.
ShareEntry = tuple[int, int, str, str, int, str]


def read_share_entries(path: str, speed: float, until_s: float = 0.0) -> list[ShareEntry]:
    """A written schedule's requests (``traffic.schedule.Schedule.write``), those due
    before ``until_s`` at ``speed`` (0: all), with their routes."""
    from servelab.traffic.routes import route_of

    entries: list[ShareEntry] = []
    with open(path) as f:
        for seq, line in enumerate(f):
            micros, method, target, body = line.rstrip("\n").split("\t")
            if until_s > 0 and int(micros) / 1e6 / speed >= until_s:
                break
            entries.append((seq, int(micros), method, target, int(body),
                            route_of(target.partition("?")[0])))
    return entries


def split_shares(entries: list[ShareEntry], processes: int) -> list[list[ShareEntry]]:
    """The schedule dealt to ``processes`` senders in turn (request i to process i mod
    N): each share keeps the whole log's shape at 1/N of its rate, bursts included."""
    return [entries[i::processes] for i in range(processes)]


@dataclass
class ReplayShare:
    """One process's share of a replayed schedule, its requests taken in order by the
    process's Users: each free User takes the next and waits for its time, as vegeta's
    workers take hits. The share's clock starts at its first claim (a worker on another
    machine starts when its Users do)."""

    entries: list[ShareEntry]
    bodies: list[dict[str, str]]
    speed: float = 1.0
    next_index: int = 0
    started_at: float | None = None

    def claim(self, now: float) -> tuple[ShareEntry, float] | None:
        """The next request and the time it is due (None: the share is done)."""
        if self.next_index >= len(self.entries):
            return None
        if self.started_at is None:
            self.started_at = now
        entry = self.entries[self.next_index]
        self.next_index += 1
        return entry, self.started_at + entry[1] / 1e6 / self.speed
