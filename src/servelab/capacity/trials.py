"""One capacity trial: a fixed arrival rate sent for a few seconds, what it measured, and
whether it can be trusted (the driver delivered the rate, and was not what set the pace).

A trial counts only if
- the driver sent the schedule: its requests went out at the target rate within
  RATE_TOLERANCE (oha's per-request send times: the actual start of each request, not its
  scheduled one);
- the driver's CPUs were not saturated (analysis.checks.DRIVER_SATURATED);
- Little's law leaves room in the driver's connections: the requests in flight, rate x
  mean latency, stay under IN_FLIGHT_SHARE of the connections it may open. Past that the
  open model degrades to a closed one (a request waits for a free connection), and the
  latency measured is the driver's limit as much as the stack's.
A trial that broke the SLO while the driver's connections were full is still broken (its
requests waited, from their intended send time, longer than the SLO allows); one that
held the SLO under any of these problems is not evidence that the stack holds the rate.

A replay whose sender fell behind its schedule (``traffic.fidelity``) is told apart by
what the sender itself records (``Sender``):
- its connections all busy (the most requests it had out at once reached the cap) with
  CPU to spare: the stack did not answer, and the sender waited on it. The trial is
  trusted and broken, charged to the stack (its latencies count from the intended send
  times, the lag included), with its lag shown;
- its own CPU full: the sender set the pace. Not trusted; the search goes on below that
  speed (``run``);
- neither: other processes took its CPU, or its timers were late. Not trusted; run once
  more, as any untrusted trial.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from servelab.analysis.checks import DRIVER_SATURATED
from servelab.capacity.search import Outcome
from servelab.capacity.slo import LATENCY_STATS, Slo, latency_stats

RATE_TOLERANCE = 0.01  # the "achieved rate within 1 % of the target"
IN_FLIGHT_SHARE = 0.9


class Sender(StrEnum):
    """How the load driver kept the trial's schedule (see the module's docstring)."""

    KEPT = "kept"
    HELD_UP = "held up by the stack"  # fell behind with its connections all busy
    OUT_OF_CPU = "out of CPU"  # its own CPUs full: it set the pace
    STARVED = "fell behind with CPU to spare"  # nor were its connections full


@dataclass(frozen=True)
class Trial:
    """A measured trial (one line of trials.jsonl)."""

    variant: str
    number: int  # 1, 2, ... within its variant's search
    rate: float  # target arrival rate, requests/s
    started: str
    seconds: float  # the schedule's length
    sent: int
    send_rate: float  # requests/s the driver actually sent at
    answered: int
    errors: int
    latency_ms: Mapping[str, float]  # LATENCY_STATS of the answered requests
    driver_cpu_share: float  # of its CPUs
    connections: int  # the driver's cap
    problems: tuple[str, ...] = ()  # why it cannot be trusted ("" -> trusted)
    # Machine -> the rate its driver processes sent at (Locust's workers); empty: one
    # driver on this machine.
    delivered: Mapping[str, float] = dataclasses.field(default_factory=dict)
    start: int = 1  # which start of its stack it ran on (1, 2, ...: a fresh one per trial)
    # The machine's own speed before that start (observe.neighbours.cpu_speed: fixed
    # Python work per second on the stack's CPU); None: not probed (CPUs not pinned).
    cpu_speed: float | None = None
    # How long that start waited for the machine to come back from a slow moment, and
    # whether it started slow all the same (capacity.machine).
    waited_s: float = 0.0
    started_slow: bool = False
    # CPU seconds (user + system) each of the stack's processes used during the trial,
    # by "<role> <pid>" ("app 4242", "nginx 4240"): whether a broken trial's stack ran out
    # of CPU or waited with CPU to spare, and how its workers shared the load. Empty:
    # not measured (trials stored before it was).
    cpu_s: Mapping[str, float] = dataclasses.field(default_factory=dict)
    # Of the stack's CPUs (its pinned set, else all), the share busy with its processes
    # over the trial; None: not measured.
    stack_cpu_share: float | None = None
    # A replayed log's trial: ``rate`` is the speed (times the log's traffic), the
    # requests/s its schedule asked at that speed is ``asked_rps``, and why its sender did
    # not keep the schedule (traffic.fidelity), if it did not. None / empty: a fixed rate.
    asked_rps: float | None = None
    replay_problems: tuple[str, ...] = ()
    # A replay's fidelity (None: a fixed rate, or not measured): the send lag's p99, the
    # share of the scheduled requests sent, the most requests out at once.
    send_lag_p99_ms: float | None = None
    sent_share: float | None = None
    peak_in_flight: int | None = None
    sender: Sender = Sender.KEPT  # set by ``judged``

    @property
    def stack_cpu_ms_per_request(self) -> float | None:
        """The stack's CPU time per answered request (ms); None where not measured."""
        if not self.cpu_s or not self.answered:
            return None
        return 1000 * sum(self.cpu_s.values()) / self.answered

    def by_machine(self, digits: int = 1) -> str:
        """``delivered`` in words: "load-a 99.5, load-b 50.1" (empty: one driver here)."""
        return ", ".join(f"{m} {rate:,.{digits}f}" for m, rate in self.delivered.items())

    @property
    def error_ratio(self) -> float:
        return self.errors / self.sent if self.sent else 1.0

    @property
    def in_flight(self) -> float:
        """Little's law: requests in flight on average, rate x mean latency."""
        asked = self.rate if self.asked_rps is None else self.asked_rps
        return asked * self.latency_ms["mean"] / 1000

    @property
    def trusted(self) -> bool:
        return not self.problems

    @property
    def held_up(self) -> bool:
        """The stack held the sender up: a broken trial, charged to the stack."""
        return self.sender is Sender.HELD_UP

    def outcome(self, slo: Slo) -> Outcome:
        """What the trial says of the SLO. Held up by the stack, it broke: its latencies
        (from the intended send times) say by how much, or, where they kept under the
        bound all the same, it bounds the capacity from above as failed requests do."""
        margin = slo.margin(self.latency_ms)
        return Outcome(
            self.rate, margin,
            errors_broke=self.error_ratio > slo.max_error_ratio
            or (self.held_up and margin >= 1.0),
        )

    def to_dict(self) -> dict[str, object]:
        data = dataclasses.asdict(self)
        data["latency_ms"] = dict(self.latency_ms)
        data["problems"] = list(self.problems)
        data["replay_problems"] = list(self.replay_problems)
        data["delivered"] = dict(self.delivered)
        data["cpu_s"] = dict(self.cpu_s)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Trial:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["problems"] = tuple(values.get("problems", ()))  # type: ignore[arg-type]
        values["replay_problems"] = tuple(
            values.get("replay_problems", ())  # type: ignore[arg-type]
        )
        values["sender"] = Sender(str(values.get("sender", Sender.KEPT)))
        return cls(**values)  # type: ignore[arg-type]


def sender_state(trial: Trial) -> Sender:
    """How the driver kept ``trial``'s schedule: from its own CPU share, whether a replay
    fell behind, and the most requests it had out at once (Little's law's mean, rate x
    mean latency, where the sender did not record them) against its connections."""
    if trial.driver_cpu_share >= DRIVER_SATURATED:
        return Sender.OUT_OF_CPU
    if not trial.replay_problems:
        return Sender.KEPT
    busy = trial.peak_in_flight if trial.peak_in_flight is not None else trial.in_flight
    return Sender.HELD_UP if busy >= IN_FLIGHT_SHARE * trial.connections else Sender.STARVED


def sender_words(trial: Trial) -> str:
    """A replay's fidelity in a few words: "send lag p99 1.6 ms, 100.0 % sent"; with, when
    the stack held the sender up, its connections ("...: held up by the stack, 1,000 of
    its 1,000 connections busy"). Empty for a fixed rate."""
    if trial.send_lag_p99_ms is None:
        return ""
    said = f"send lag p99 {trial.send_lag_p99_ms:,.1f} ms"
    if trial.sent_share is not None:
        said += f", {percent(trial.sent_share)} sent"
    if trial.held_up:
        busy = "" if trial.peak_in_flight is None else (
            f", {trial.peak_in_flight:,} of its {trial.connections:,} connections busy"
        )
        said += f": {Sender.HELD_UP}{busy}"
    return said


def percent(share: float) -> str:
    """A share sent: "100 %" when every request went, else one decimal ("99.9 %"), never
    rounded up to all of them."""
    if share >= 1.0:
        return "100 %"
    return f"{min(99.9, 100 * share):.1f} %"


def judged(trial: Trial, slo: Slo) -> Trial:
    """``trial`` with how its sender kept the schedule and the reasons it cannot be
    trusted (see the module's docstring)."""
    problems = []
    sender = sender_state(trial)
    trial = dataclasses.replace(trial, sender=sender)
    if sender is Sender.OUT_OF_CPU:
        problems.append(
            f"the load driver used {100 * trial.driver_cpu_share:.0f} % of its CPUs: it may "
            "have set the pace"
        )
    held = trial.outcome(slo).held
    asked = trial.rate if trial.asked_rps is None else trial.asked_rps
    if held and trial.send_rate < asked * (1 - RATE_TOLERANCE):
        problems.append(
            f"the driver sent {trial.send_rate:,.1f} req/s of the {asked:,.1f} asked "
            f"(more than {100 * RATE_TOLERANCE:g} % short)"
        )
    # A replay its sender did not keep for want of CPU tells nothing of the stack, held or
    # broken: its requests went out late (counted in their latency) or not at all. One
    # the stack held up is the stack's (a broken trial).
    if sender is Sender.STARVED:
        busy = trial.peak_in_flight if trial.peak_in_flight is not None else trial.in_flight
        problems += [
            *trial.replay_problems,
            f"the sender {Sender.STARVED} (its CPUs {100 * trial.driver_cpu_share:.0f} % "
            f"busy) and with connections free (at most {busy:,.0f} of "
            f"{trial.connections:,} busy): other processes took its CPU, or its timers "
            "were late",
        ]
    elif sender is Sender.OUT_OF_CPU:
        problems += trial.replay_problems
    if held and trial.in_flight >= IN_FLIGHT_SHARE * trial.connections:
        problems.append(
            f"{trial.in_flight:,.0f} requests in flight (rate x mean latency) filled the "
            f"driver's {trial.connections} connections: raise --connections"
        )
    return dataclasses.replace(trial, problems=tuple(problems))


def measured_latencies(latencies_ms: Sequence[float]) -> dict[str, float]:
    """Every statistic an SLO may bound, of one trial's answered requests."""
    return latency_stats(latencies_ms, list(LATENCY_STATS))
