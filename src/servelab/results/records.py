"""Frozen records of what one measured run produced."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from servelab.traffic.fidelity import Fidelity

PER_RUN_DETAIL = "per run: "  # see LoadMeasurement.driver_details
# The driver detail naming load machines whose driver processes were CPU-bound in the run
# (Locust's workers on other machines), for the driver-bottleneck warning.
CPU_BOUND_MACHINES_DETAIL = "CPU-bound workers"


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of already sorted values (0 for none): how a record's
    latency percentiles are computed from its requests, by a driver that reports each one
    (Locust) and by the merge of a run's slices (``servelab.measuring.slices``)."""
    if not sorted_values:
        return 0.0
    # Rounded first: 99.9 / 100 * 1000 is 999.0000000000001 in floating point, whose
    # ceiling would take the 1000th value for the 999th.
    rank = max(1, math.ceil(round(pct / 100 * len(sorted_values), 9)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])



def weighted_percentile(sorted_pairs: Sequence[tuple[float, float]], pct: float) -> float:
    """Nearest-rank percentile of (value, weight) pairs sorted by value (0 for none): the
    first value whose cumulative weight reaches ``pct`` % of the total; with equal
    weights, ``percentile``."""
    total = sum(w for _, w in sorted_pairs)
    if not sorted_pairs or total <= 0:
        return 0.0
    target = round(pct / 100 * total, 9)
    cumulative = 0.0
    for value, weight in sorted_pairs:
        cumulative += weight
        if round(cumulative, 9) >= target:
            return float(value)
    return float(sorted_pairs[-1][0])

class Record(BaseModel):
    """A field added to a record needs a default that means what records stored before
    it meant; any other change needs a new format (``servelab.results.formats``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class NamedRequests(Record):
    """One request name's figures (drivers that tell requests apart by name: Locust).
    A sliced run's percentiles here are its slices' request-weighted means."""

    method: str
    name: str
    requests: int
    failures: int
    rps: float
    latency_mean_ms: float
    latency_p50_ms: float
    latency_p99_ms: float
    latency_max_ms: float
    failures_by_kind: dict[str, int] = {}  # HTTP code or connection-error kind -> count


class ReplayFidelity(Record):
    """How faithfully a replay kept its access log's schedule (servelab.traffic.fidelity):
    send lag, mix per route, inter-arrival KS distance; ``problems`` empty: kept."""

    speed: float
    scheduled: int
    sent: int
    lag_p50_ms: float
    lag_p99_ms: float
    lag_max_ms: float
    max_mix_error_points: float  # the largest |sent - scheduled share| over routes, points
    ks_distance: float
    problems: tuple[str, ...] = ()
    # The most requests the sender had out at once: at its connection cap, a sender that
    # fell behind was held up by the stack, not short of CPU (capacity.trials).
    peak_in_flight: int | None = None

    @property
    def kept(self) -> bool:
        return not self.problems

    @classmethod
    def of(cls, fidelity: Fidelity, speed: float) -> ReplayFidelity:
        return cls(
            speed=speed, scheduled=fidelity.scheduled, sent=fidelity.sent,
            lag_p50_ms=fidelity.lag_p50_ms, lag_p99_ms=fidelity.lag_p99_ms,
            lag_max_ms=fidelity.lag_max_ms,
            max_mix_error_points=fidelity.max_mix_error_points,
            ks_distance=fidelity.ks_distance, problems=fidelity.problems,
            peak_in_flight=fidelity.peak_in_flight,
        )


class LoadMachine(Record):
    """One machine's share of a run's load, sent by driver processes on other machines
    (Locust's workers, ``--expect-workers``), as their own reports counted it."""

    machine: str  # its name (``servelab locust-worker --name``, default its host name)
    processes: int
    requests: int
    # The busiest of its processes over the run, in % of one core (its own CPU clock).
    cpu_max_pct: float
    cpu_warning: bool = False  # the driver itself warned about its CPU
    # Requests/s its processes sent at, on the built-in scenario's schedule (open model).
    send_rate: float | None = None


class LoadMeasurement(Record):
    """What the load driver saw during one run. Latencies in milliseconds.

    ``status_counts`` keys are HTTP codes ("200", "502") when the driver tells
    them apart, else classes ("2xx", "non-2xx"). ``connection_errors`` counts
    requests that got no HTTP answer, by kind ("connect", "timeout", "read"...).
    """

    driver: str
    requests_total: int
    duration_s: float
    rps: float
    latency_mean_ms: float
    latency_p50_ms: float
    latency_p90_ms: float
    latency_p99_ms: float
    latency_max_ms: float
    status_counts: dict[str, int]
    connection_errors: dict[str, int]
    bytes_received: int
    driver_cpu_s: float = 0.0
    driver_peak_rss_bytes: int = 0
    # Answered requests slower than the load's slow_ms (None when not asked for).
    slow_requests: int | None = None
    # Processes the driver ran as (its CPU time covers them all), and whether the driver
    # itself said its CPU was overloaded (Locust's "CPU usage above 90%").
    driver_processes: int = 1
    driver_overloaded: bool = False
    # What the driver ran, in words (Locust: scenario, User classes and their client);
    # names starting with PER_RUN_DETAIL are figures that
    # differ from run to run (the report's one line about the driver leaves them out).
    driver_details: dict[str, str] = {}
    # Per request name, for drivers that name requests (empty for the others).
    by_name: tuple[NamedRequests, ...] = ()
    # Per machine that sent the load from elsewhere (Locust's workers on other machines);
    # empty: the load was sent from this machine.
    machines: tuple[LoadMachine, ...] = ()
    # A replay's fidelity to its schedule (None: not a replay).
    replay: ReplayFidelity | None = None

    @property
    def ok_responses(self) -> int:
        return sum(n for code, n in self.status_counts.items() if code[0] in "23")

    @property
    def error_responses(self) -> int:
        return sum(n for code, n in self.status_counts.items() if code[0] not in "23")

    @property
    def connection_error_count(self) -> int:
        return sum(self.connection_errors.values())

    @property
    def errors(self) -> int:
        """Requests that failed: non-2xx/3xx answers plus requests with no answer."""
        return self.error_responses + self.connection_error_count

    @property
    def error_share(self) -> float:
        """Failed requests' share of those sent; 1.0 when none were sent (a run that sent
        nothing held no limit)."""
        return self.errors / self.requests_total if self.requests_total else 1.0

    @property
    def ok_rps(self) -> float:
        """Successful (2xx/3xx) answers per second: throughput that does not count 502s."""
        return self.ok_responses / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def driver_cpu_us_per_request(self) -> float:
        return 1e6 * self.driver_cpu_s / self.requests_total if self.requests_total else 0.0


class ProcessUsage(Record):
    """CPU and memory of one process of the stack over the measured window."""

    role: str  # "nginx", "app"
    pid: int
    name: str
    cpu_s: float  # user + system
    peak_rss_bytes: int
    # Of cpu_s, the time spent in the kernel on the process's behalf (system calls: a
    # socket send's copy and, on loopback, the receiver's protocol work); None in records
    # stored before it was recorded.
    system_s: float | None = None


class ListenQueue(Record):
    """The app's listen queue as ``ss`` saw it during the measured window."""

    address: str
    backlog: int  # the queue's limit (Send-Q): min(app backlog, somaxconn)
    max_queued: int  # most connections seen waiting to be accepted (Recv-Q)
    mean_queued: float
    samples: int
    full_samples: int  # samples with the queue at (or past) its limit
    series: tuple[tuple[float, int], ...] = ()  # (seconds, queued), thinned


class SliceFigures(Record):
    """One slice of a sliced run, as measured; kept raw so that the statistics can
    compare the slices of one pass (measured seconds apart) with each other."""

    pass_number: int  # slices with the same number (in one workload) were measured together
    started_at: str
    requests: int
    duration_s: float
    rps: float
    latency_mean_ms: float
    latency_p50_ms: float
    latency_p90_ms: float
    latency_p99_ms: float
    errors: dict[str, int] = {}  # failed requests by kind: HTTP code or connection error
    stack_cpu_s: float = 0.0

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


class ProfileInfo(Record):
    """Where a run's folded stacks are (``--profile``; servelab.results.profiles) and what
    reading them needs: which processes were the servers' first ones (the masters)."""

    file: str  # relative to the experiment directory
    samples: int
    rate_hz: int
    masters: tuple[int, ...]  # pids: the rest of their role's processes are its workers
    problems: tuple[str, ...] = ()  # what is missing from it (py-spy failed for a server)
    # A crowded stack (more of the app's threads than its CPUs) is profiled at a
    # concurrency of its own, no more than its CPUs (py-spy counts a thread waiting for a
    # CPU as running): that window's processes and requests, which the samples are
    # scaled to. None: at the measured window's load, scaled to the measured window.
    concurrency: int | None = None
    processes: tuple[ProcessUsage, ...] = ()
    requests: int = 0


class RunRecord(Record):
    experiment: str
    variant: str
    workload: str
    repetition: int
    started_at: str
    load: LoadMeasurement
    processes: tuple[ProcessUsage, ...]
    stack_cpus: str | None
    stack_cpu_quota: float | None = None  # CPUs of time the stack was capped at (cgroup)
    driver_cpus: str | None
    warmup_requests: int
    # Failure attribution (servelab.observe.attribution): lines of nginx's and the app
    # server's logs written during the measured window, counted by class, with
    # the first line of each class. Empty in records written before they existed.
    log_events: dict[str, int] = {}
    log_examples: dict[str, str] = {}
    # Where the stack ran: its network namespace (None: the host's network), the
    # somaxconn there, the app's effective listen backlog, and its sampled queue.
    namespace: str | None = None
    somaxconn: int | None = None
    listen_backlog: int | None = None
    listen_queue: ListenQueue | None = None
    notes: tuple[str, ...] = ()
    # The requests the front logged during the measured window, by client address (nginx
    # with the access_log knob; None without it).
    front_requests_by_client: dict[str, int] | None = None
    warmup_rps: tuple[float, ...] = ()  # requests/s of each discarded warm-up round
    # Whether the stack and driver ran favoured by a cgroup CPU weight (servelab.host.cgroups),
    # and the share of the stack's CPUs other processes took (servelab.observe.neighbours).
    cpu_priority: bool | None = None
    neighbour_cpu_share: float | None = None
    # Speed of the stack's CPU just before its stack started: units of fixed work per
    # second (servelab.observe.neighbours.cpu_speed); it drifts when the machine itself does.
    cpu_speed: float | None = None
    # Measured in this many slices interleaved with the other runs' (servelab.measuring.slices).
    slices: int = 1
    # Each slice's own figures (empty for runs in one piece, and in older records).
    slice_figures: tuple[SliceFigures, ...] = ()
    # Whether its slices were measured at the same moments as the other stacks of its
    # round (side by side); None in older records: as the experiment says. A side-by-side
    # experiment measures in turns once a stack alone left its CPUs idle (below).
    together: bool | None = None
    # Share of its CPUs the stack kept busy when driven alone for a moment before its
    # first side-by-side slices (servelab.measuring.runner); None where not probed.
    solo_cpu_share: float | None = None
    # Folded stacks of the stack's Python processes over the measured window (--profile).
    profile: ProfileInfo | None = None
    # Whether its passes in turns were driven by load drivers kept running and switched
    # between the round's stacks (servelab.measuring.switching); None where not asked
    # for (``switching``), and in older records.
    switched: bool | None = None

    @property
    def stack_cpu_s(self) -> float:
        return sum(p.cpu_s for p in self.processes)

    @property
    def stack_peak_rss_bytes(self) -> int:
        return sum(p.peak_rss_bytes for p in self.processes)
