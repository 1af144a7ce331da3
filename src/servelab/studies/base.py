"""What every study is: its options a user may set (``StudyOptions``) and the study itself
(``Study``, which builds its experiment from them). The studies, one module per kind,
stand on it; ``servelab.studies`` lists them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from servelab.config.experiment import Experiment
from servelab.config.stack import StackSpec


@dataclass(frozen=True)
class StudyOptions:
    """Options a user may set on any study; None keeps the study's own default."""

    repetitions: int | None = None
    concurrency: int | None = None
    requests: int | None = None
    duration_s: float | None = None
    driver: str | None = None
    endpoints: tuple[str, ...] | None = None
    workers: tuple[int, ...] | None = None
    threads: tuple[int, ...] | None = None
    warmup_requests: int | None = None
    # Failure-mode studies (servelab.studies.failures)
    rate: float | None = None  # open-model arrival rate, requests per second
    sleep_s: float | None = None  # seconds the sleepy app holds its worker per request
    somaxconn: tuple[int, ...] | None = None  # one variant per value (backlog study)
    netns: str | None = None  # "auto" | "require" | "off" (see spec.NetworkSpec)
    timeout_s: float | None = None  # the load driver's per-request timeout
    # How the study's stacks are measured: True side by side, False in turns, None the
    # study's own choice.
    side_by_side: bool | None = None
    # Where that choice is side by side: whether these stacks (the study's, before it is
    # built) get CPUs of their own on this machine; asked once, and in turns where not
    # (api.build_study gives it: measuring.fits_side_by_side). None: side by side.
    fits_side_by_side: Callable[[Sequence[StackSpec]], bool] | None = field(
        default=None, compare=False
    )


@dataclass(frozen=True)
class Study:
    name: str
    summary: str
    source: str  # which seed article it reproduces
    build: Callable[[StudyOptions], Experiment] = field(repr=False)
    # Serves the Django reference app: --database, --db-latency, --db-jitter apply.
    accepts_database: bool = False
    # Which of the failure-mode options (FAILURE_OPTIONS) its build reads; the others
    # are refused rather than silently ignored.
    reads: frozenset[str] = frozenset()
