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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from servelab.analysis.checks import DRIVER_SATURATED
from servelab.capacity.search import Outcome
from servelab.capacity.slo import LATENCY_STATS, Slo, latency_stats

RATE_TOLERANCE = 0.01  # the "achieved rate within 1 % of the target"
IN_FLIGHT_SHARE = 0.9


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

    def outcome(self, slo: Slo) -> Outcome:
        return Outcome(
            self.rate, slo.margin(self.latency_ms),
            errors_broke=self.error_ratio > slo.max_error_ratio,
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
        return cls(**values)  # type: ignore[arg-type]


def judged(trial: Trial, slo: Slo) -> Trial:
    """``trial`` with the reasons it cannot be trusted (see the module's docstring)."""
    problems = []
    if trial.driver_cpu_share >= DRIVER_SATURATED:
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
    # A replay the sender did not keep tells nothing of the stack, held or broken: its
    # requests went out late (counted in their latency) or not at all.
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
