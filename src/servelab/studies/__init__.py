"""Ready-made experiments, each reproducing a question from the seed articles."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from servelab.config.experiment import Experiment
from servelab.config.stack import StackSpec
from servelab.errors import SpecError


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


# StudyOptions fields that only some studies read, with their CLI flags.
FAILURE_OPTIONS = {
    "rate": "--rate", "sleep_s": "--sleep", "somaxconn": "--somaxconn", "netns": "--netns",
    "timeout_s": "--timeout",
}


def check_options_apply(study: Study, options: StudyOptions) -> None:
    """A failure-mode option given to a study that does not read it is a mistake (the
    run would measure something other than what the user asked for): one line naming
    the studies it applies to."""
    for name, flag in FAILURE_OPTIONS.items():
        if getattr(options, name) is not None and name not in study.reads:
            readers = [s.name for s in all_studies().values() if name in s.reads]
            raise SpecError(
                f"{flag} does not apply to study {study.name!r}",
                f"drop {flag}, or use it with {', '.join(readers)}",
            )


def all_studies() -> dict[str, Study]:
    from servelab.studies.failures import FAILURE_STUDIES
    from servelab.studies.fronts import FRONT_STUDIES
    from servelab.studies.seeds import SEED_STUDIES
    from servelab.studies.shootout import SHOOTOUT_STUDIES

    return {
        study.name: study
        for study in (*SEED_STUDIES, *SHOOTOUT_STUDIES, *FRONT_STUDIES, *FAILURE_STUDIES)
    }


def get_study(name: str) -> Study:
    studies = all_studies()
    if name not in studies:
        raise SpecError(
            f"unknown study {name!r}",
            f"choose one of: {', '.join(studies)} (see `servelab studies`)",
        )
    return studies[name]
