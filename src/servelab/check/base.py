"""What every part of ``servelab check`` shares: the two versions' names, what a check
compares and against what (``CheckSpec``), its answer (``CheckOutcome``), the request and
the app both versions are measured with, and the ways a version fails to start or answer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from servelab.analysis.thresholds import DEFAULT_THRESHOLDS, Judgement, State
from servelab.config.load import ReplaySpec
from servelab.config.run import UserRequest
from servelab.config.stack import AppSpec
from servelab.errors import SpecError, StackStartError
from servelab.studies.seeds import SEED_ITEM_BODY

if TYPE_CHECKING:
    from servelab.config.load import RequestSpec

BASELINE, CANDIDATE = "baseline", "candidate"
# The built-in apps' request (the seed app's small async endpoint; the sleepy app's page).
_BUILTIN_REQUESTS: dict[str, dict[str, Any]] = {
    "fastapi": {"method": "POST", "path": "/async/items/", "body": SEED_ITEM_BODY},
    "sleepy": {"method": "GET", "path": "/"},
    "django": {"method": "GET", "path": "/books/"},
}


@dataclass(frozen=True)
class CheckSpec:
    """What to compare, against what, and what fails."""

    app: AppSpec  # the candidate: the app as it is now (its app_dir, its Python)
    baseline_dir: Path | None = None  # the baseline's app dir
    baseline_ref: str | None = None  # or a git revision of the app dir's repository
    thresholds: tuple[str, ...] = DEFAULT_THRESHOLDS
    inconclusive: Literal["pass", "fail"] = "fail"
    server: dict[str, Any] | None = None  # ServerSpec fields (default: the seeds' gunicorn)
    concurrency: int = 50
    duration_s: float | None = None  # per version per round (None: by the design)
    request: UserRequest | None = None  # --method, --path, ... (default: GET / or the
    # built-in app's page)
    # The baseline's own interpreter (bisect's lock-file mode: the same code, another
    # environment); None: the candidate's, one Python for both versions.
    baseline_python: Path | None = None
    # Instruction thresholds: the baseline's counts from an earlier check of the same
    # baseline (bisect's good commit, counted once: a count does not move with the
    # machine); empty: count it.
    baseline_counts: tuple[float, ...] = ()
    # An access log replayed in place of the request (--replay): both versions get its
    # schedule, in turns (latency is judged only so).
    replay: ReplaySpec | None = None


@dataclass(frozen=True)
class CheckOutcome:
    """The verdict, each threshold's judgement and what was compared."""

    judgements: tuple[Judgement, ...]
    state: State
    exit_code: int
    baseline: str  # what the baseline was ("main at 1a2b3c4", a directory)
    candidate: str
    result_dir: Path
    starts: int  # fresh starts of each version
    test: str  # the statistical test behind the intervals
    wall_s: float
    # --profile: where the candidate's CPU per request went against the baseline's
    # (analysis.explain.why_lines); empty without profiles.
    why: tuple[str, ...] = ()
    side_by_side: bool = True  # how the versions were measured: at once, or in turns
    # --profile and a threshold crossed: the candidate's differential flame graph against
    # the baseline (SVG text; check.outputs writes it beside the other outputs).
    flame_svg: str | None = None
    experiment_id: int | None = None  # its id in the results directory (bisect extends it)
    # Instruction thresholds: each version's instructions per request, as counted (no load).
    counts: dict[str, tuple[float, ...]] | None = None
    # The measuring budget it had (--budget or the default); None for a count (no load).
    budget_s: float | None = None


def check_request(check: CheckSpec) -> RequestSpec:
    """The request both versions are measured on: the user's, else the built-in app's,
    else GET /."""
    from servelab.config.load import RequestSpec
    from servelab.prepare.user_app import request_spec

    ref = check.app.ref.strip()
    request = RequestSpec.model_validate(_BUILTIN_REQUESTS.get(ref, {"method": "GET",
                                                                     "path": "/"}))
    return request if check.request is None else request_spec(request, check.request)


def check_app(check: CheckSpec) -> AppSpec:
    """The candidate's app as the check runs it."""
    if check.app.ref.strip() == "sleepy":  # its default 2 s would make a check of waiting
        return check.app.model_copy(
            update={"env": {"SERVELAB_SLEEP_S": "0.005", **check.app.env}}  # 5 ms of "I/O"
        )
    return check.app


class VersionsAnswerDifferently(SpecError):
    """The two versions answer the check's request with different statuses."""


class VersionDidNotStart(StackStartError):
    """One of the two versions did not start or answer (``version``: which): bisect skips
    a candidate that does not, and stops when the good one does not."""

    def __init__(self, version: str, failed: StackStartError) -> None:
        super().__init__(f"the {version} version: {failed.problem}", failed.fix,
                         detail=failed.detail)
        self.version = version
