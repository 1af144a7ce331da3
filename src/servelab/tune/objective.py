"""What ``servelab tune`` optimises, and the limits a configuration must keep. Pure.

- ``max-rps``: the most requests/s (closed model), under the limits;
- ``min-p99``: the lowest p99 latency at a fixed arrival rate (open model, ``rate``);
- ``min-memory``: the least stack memory (peak RSS of the front and the app server's
  processes), at a fixed rate when one is given, else under the closed load;
- ``max-capacity``: the most traffic under an SLO (``slo``: 'p99<100ms,errors<0.1%'):
  the race screens by requests/s, then each finalist's capacity is searched
  (``servelab.tune.capacity``).

The limits (``p99_ms``, ``max_error_ratio``, ``max_memory_mib``) hold for every
objective. A candidate is dropped for breaking one only when every one of its starts
broke it; one that breaks it on average is ranked but never recommended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from servelab.analysis.metrics import METRIC_BY_KEY, Metric
from servelab.errors import SpecError
from servelab.results.records import RunRecord

ObjectiveKind = Literal["max-rps", "min-p99", "min-memory", "max-capacity"]
OBJECTIVES: tuple[ObjectiveKind, ...] = ("max-rps", "min-p99", "min-memory", "max-capacity")
MIB = 2**20

MEMORY = Metric(
    "memory_mib",
    "Stack memory (peak RSS)",
    "MiB",
    False,
    lambda r: r.stack_peak_rss_bytes / MIB,
    lambda s: 0.0,  # not kept per slice: compared per start (servelab.tune.race)
)


@dataclass(frozen=True)
class Objective:
    kind: ObjectiveKind = "max-rps"
    rate: float | None = None  # open model: arrivals per second (min-p99, min-memory)
    p99_ms: float | None = None
    max_error_ratio: float = 0.01
    max_memory_mib: float | None = None
    slo: str | None = None  # max-capacity: as `servelab capacity --slo` takes it

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise SpecError(
                f"unknown objective {self.kind!r}", f"choose one of: {', '.join(OBJECTIVES)}"
            )
        if self.kind == "min-p99" and self.rate is None:
            raise SpecError(
                "--objective min-p99 compares latency at a fixed arrival rate",
                "pass --rate REQUESTS_PER_SECOND (e.g. --rate 200)",
            )
        if self.kind == "max-rps" and self.rate is not None:
            raise SpecError(
                "--objective max-rps drives each stack as hard as it goes (closed model); "
                "--rate fixes the arrivals instead",
                "leave out --rate, or use --objective min-p99 / min-memory with it",
            )
        if (self.kind == "max-capacity") != (self.slo is not None):
            raise SpecError(
                "--objective max-capacity and --slo go together",
                "e.g. --objective max-capacity --slo 'p99<100ms,errors<0.1%'",
            )
        if self.kind == "max-capacity":
            from servelab.capacity.slo import parse_slo

            parse_slo(self.slo or "")  # a bad SLO: one line before anything starts
            if self.rate is not None or self.p99_ms is not None:
                raise SpecError(
                    "--objective max-capacity searches each finalist's rate under --slo; "
                    "--rate and --p99-ms do not apply",
                    "leave them out (the SLO carries the p99 bound)",
                )
        for label, value in (
            ("--rate", self.rate), ("--p99-ms", self.p99_ms),
            ("--max-memory", self.max_memory_mib),
        ):
            if value is not None and not value > 0:
                raise SpecError(f"{label} must be positive, got {value:g}", f"pass {label} > 0")
        if not 0 <= self.max_error_ratio < 1:
            raise SpecError(
                f"--max-error-ratio must be from 0 to below 1, got {self.max_error_ratio:g}",
                "e.g. --max-error-ratio 0.01 (1 % of requests may fail)",
            )

    @property
    def metric(self) -> Metric:
        """The figure the race compares."""
        return {
            "max-rps": METRIC_BY_KEY["rps"],
            "max-capacity": METRIC_BY_KEY["rps"],  # the race's screen
            "min-p99": METRIC_BY_KEY["latency_p99_ms"],
            "min-memory": MEMORY,
        }[self.kind]

    @property
    def open_model(self) -> bool:
        return self.rate is not None

    def describe(self) -> str:
        """'max-rps under p99 <= 50 ms, errors <= 1 %'."""
        if self.kind == "max-rps":
            text = "the most requests/s"
        elif self.kind == "min-p99":
            text = f"the lowest p99 latency at {self.rate:g} req/s"
        elif self.kind == "max-capacity":
            text = (f"the most traffic at {self.slo} (the race screens by requests/s, "
                    "then the finalists' capacities are searched)")
        else:
            text = "the least memory" + (f" at {self.rate:g} req/s" if self.rate else "")
        return f"{text}, {', '.join(self.limit_texts())}"

    def limit_texts(self) -> list[str]:
        limits = [f"errors <= {self.max_error_ratio:.3g}"]
        if self.p99_ms is not None:
            limits.insert(0, f"p99 <= {self.p99_ms:g} ms")
        if self.max_memory_mib is not None:
            limits.append(f"memory <= {self.max_memory_mib:g} MiB")
        return limits

    def broken_limits(self, run: RunRecord) -> list[str]:
        """The limits one run broke, each as 'p99 81.2 ms > 50 ms'."""
        broken = []
        load = run.load
        if self.p99_ms is not None and load.latency_p99_ms > self.p99_ms:
            broken.append(f"p99 {load.latency_p99_ms:.1f} ms > {self.p99_ms:g} ms")
        ratio = load.error_share
        if ratio > self.max_error_ratio:
            broken.append(f"errors {ratio:.3g} > {self.max_error_ratio:.3g}")
        memory = run.stack_peak_rss_bytes / MIB
        if self.max_memory_mib is not None and memory > self.max_memory_mib:
            broken.append(f"memory {memory:.0f} MiB > {self.max_memory_mib:g} MiB")
        return broken

    def breaks_always(self, runs: Sequence[RunRecord], min_starts: int) -> str | None:
        """Why the candidate is out: at least ``min_starts`` starts and every one broke a
        limit (the last start's figures said); None otherwise."""
        if len(runs) < min_starts or not runs:
            return None
        kinds = [{b.split(" ", 1)[0] for b in self.broken_limits(r)} for r in runs]
        always = set.intersection(*kinds)
        if not always:
            return None
        last = [b for b in self.broken_limits(runs[-1]) if b.split(" ", 1)[0] in always]
        return f"broke a limit in each of its {len(runs)} starts ({'; '.join(last)})"

    def meets_on_average(self, runs: Sequence[RunRecord]) -> bool:
        """The limits hold for the candidate's mean p99, error ratio and memory."""
        if not runs:
            return False
        n = len(runs)
        p99 = sum(r.load.latency_p99_ms for r in runs) / n
        memory = sum(r.stack_peak_rss_bytes for r in runs) / n / MIB
        return (
            (self.p99_ms is None or p99 <= self.p99_ms)
            and pooled_error_share(runs) <= self.max_error_ratio
            and (self.max_memory_mib is None or memory <= self.max_memory_mib)
        )


def pooled_error_share(runs: Sequence[RunRecord]) -> float:
    """Failed requests' share of all the runs' requests (1.0 when none were sent)."""
    requests = sum(r.load.requests_total for r in runs)
    return sum(r.load.errors for r in runs) / requests if requests else 1.0
