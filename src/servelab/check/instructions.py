"""``servelab check --fail-if "instructions > +5%"``: the two versions compared on the
app's instructions per request, counted under valgrind with no load
(servelab.measuring.instructions), in place of driving the stack.

Each version is counted ``repetitions`` times; the change and its 95 % interval come from
Welch's test on those counts, and each threshold is judged on them
as a load check's are (servelab.analysis.thresholds). Counts run side by side, one per
usable CPU: what else the machine runs does not move them. The counts hardly move between
repetitions (a tenth of a percent), so two of each decide a change a few tenths of a
percent from the limit, in a minute or two, whatever the machine's speed. A count that
does not move at all between repetitions is taken as exact.

The counts are kept in ``--results``/instructions/, one JSON file per check, written
after every count (with the commits of both versions, as a load check's environment
names them).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab.analysis.stats import Comparison, compare
from servelab.analysis.thresholds import Threshold, exit_code, judge, overall
from servelab.apps import ResolvedApp
from servelab.check.base import (
    BASELINE,
    CANDIDATE,
    CheckOutcome,
    CheckSpec,
    VersionDidNotStart,
    VersionsAnswerDifferently,
    check_app,
    check_request,
)
from servelab.config.load import RequestSpec
from servelab.config.run import RunOptions
from servelab.config.stack import AppSpec
from servelab.config.thresholds import COUNTED
from servelab.errors import SpecError, StackStartError

if TYPE_CHECKING:
    from servelab.measuring.instructions import Count

REPETITIONS = 2  # counts of each version
RESULTS_SUBDIR = "instructions"
TEST = "Welch's t-test on instruction counts (cachegrind)"
WORKLOAD = "app"


def counted(thresholds: Sequence[Threshold]) -> bool:
    """Whether the check counts instructions (True) or drives load (False); SpecError
    when the thresholds ask for both."""
    kinds = {t.metric in COUNTED for t in thresholds}
    if kinds == {True, False}:
        raise SpecError(
            "instructions thresholds cannot be mixed with load thresholds in one check",
            "run two checks: one with --fail-if 'instructions > ...', one with the others",
        )
    return kinds == {True}


def count_comparison(baseline: Sequence[float], candidate: Sequence[float]) -> Comparison:
    """The candidate's counts against the baseline's: Welch's test, and an exact
    difference where neither side's counts moved."""
    with warnings.catch_warnings():  # scipy warns of counts alike to the last digit
        warnings.simplefilter("ignore", RuntimeWarning)
        found = compare(baseline, candidate, higher_is_better=False)
    if found.interval is None and len(set(baseline)) == 1 and len(set(candidate)) == 1:
        difference = candidate[0] - baseline[0]
        found = replace(found, interval=(difference, difference),
                        reason="the same count in every repetition: exact")
    return replace(found, test=TEST, starts=(len(baseline), len(candidate)))


def run_instruction_check(
    check: CheckSpec,
    thresholds: Sequence[Threshold],
    options: RunOptions,
    *,
    say: Callable[[str], None],
    repetitions: int = REPETITIONS,
) -> CheckOutcome:
    """Count both versions' instructions per request and judge ``thresholds`` (every one
    on instructions)."""
    from servelab.apps.interpreter import with_app_python
    from servelab.check.versions import baseline_version, describe_version
    from servelab.measuring.instructions import valgrind
    from servelab.prepare.environment import collect_environment

    started = time.monotonic()
    valgrind()  # installed, before anything else
    app, note = with_app_python(check.app)  # one Python for both versions
    if note:
        say(note)
    check = replace(check, app=app)
    request = check_request(check)
    candidate = check_app(check)
    with baseline_version(check.app, check.baseline_dir, check.baseline_ref) as (where, label):
        specs = {
            BASELINE: candidate.model_copy(update={
                "app_dir": where, "python": check.baseline_python or candidate.python}),
            CANDIDATE: candidate,
        }
        counting = (CANDIDATE,) if check.baseline_counts else (BASELINE, CANDIDATE)
        # Only the versions counted here: a reused baseline's app need not import again.
        resolved = {name: _resolved(name, specs[name]) for name in counting}
        versions = {CANDIDATE: describe_version(check.app.app_dir),
                    BASELINE: describe_version(where or check.app.app_dir)}
        if check.baseline_python is not None:  # two environments: history leaves it out
            versions[CANDIDATE]["python"] = str(check.app.python)
            versions[BASELINE]["python"] = str(check.baseline_python)
        environment = collect_environment({"app_versions": versions})
        reused = [name for name in (BASELINE, CANDIDATE) if name not in counting]
        result_dir = _result_dir(options.results_dir)
        counts: dict[str, list[float]] = {BASELINE: list(check.baseline_counts),
                                          CANDIDATE: []}
        say(f"counting instructions per request of {request.method} {request.path} under "
            f"valgrind, {repetitions} times for the {' and the '.join(counting)}"
            + ("" if len(counting) > 1 else " (the baseline's counts from before)"))
        jobs = [name for _ in range(repetitions) for name in counting]
        for name, done in _counted_at_once(jobs, resolved, specs, request):
            counts[name].append(done.per_request)
            say(f"  {name} #{len(counts[name])}: {done.per_request:,.0f} instructions per "
                "request")
            write_record(result_dir, request, environment, reused, counts)
    comparison = count_comparison(counts[BASELINE], counts[CANDIDATE])
    judgements = tuple(judge(t, comparison, 0.0, WORKLOAD) for t in thresholds)
    state = overall(judgements)
    return CheckOutcome(
        judgements, state, exit_code(state, check.inconclusive), label,
        str(check.app.app_dir or check.app.ref), result_dir, repetitions, TEST,
        time.monotonic() - started, side_by_side=False,
        counts={name: tuple(values) for name, values in counts.items()},
    )


@contextlib.contextmanager
def _candidate_cannot_start(name: str) -> Iterator[None]:
    """A SpecError of the candidate's is a version that does not start (bisect skips it);
    the baseline's stays the user's error (exit 2)."""
    try:
        yield
    except SpecError as exc:
        if name == BASELINE:
            raise
        raise VersionDidNotStart(
            name, StackStartError(exc.problem, exc.fix, detail=exc.detail)
        ) from None


def _resolved(name: str, spec: AppSpec) -> ResolvedApp:
    """The version's app, checked to import: the candidate's failing is a version that
    does not start (bisect skips it), the baseline's the user's --app (exit 2)."""
    from servelab.prepare.user_app import resolve_user_app

    with _candidate_cannot_start(name):
        return resolve_user_app(spec)


def _counted_at_once(
    jobs: Sequence[str], resolved: dict[str, ResolvedApp], specs: dict[str, AppSpec],
    request: RequestSpec,
) -> Iterator[tuple[str, Count]]:
    """Each job's count (a version's name), as they end, several at once: one per usable
    CPU. A count does not move with what else the machine runs, so counting side by side
    costs nothing in precision and halves the wait on two CPUs. The first failure stops
    the counts not yet begun and is raised."""
    workers = max(1, min(len(jobs), len(os.sched_getaffinity(0))))
    pool = ThreadPoolExecutor(workers, thread_name_prefix="servelab-count")
    try:
        futures = {
            pool.submit(_counted, name, resolved[name], specs[name].env, request): name
            for name in jobs
        }
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _counted(name: str, app: ResolvedApp, env: dict[str, str], request: RequestSpec) -> Count:
    """One count of a version, which must serve the request with the expected status:
    counting another answer's work would compare two different things. A candidate that
    fails or answers otherwise is a version that cannot be measured (bisect skips it);
    the baseline's doing so is the user's request or app (exit 2)."""
    from servelab.measuring.instructions import count

    with _candidate_cannot_start(name):
        done = count(app, env, request)
    if list(done.statuses) != [request.expect_status]:
        said = (f"the {name} version answers {request.method} {request.path} with HTTP "
                f"{', '.join(map(str, done.statuses))}, not {request.expect_status}")
        fix = "give a request both versions answer so (--method, --path, --expect-status)"
        if name == BASELINE:
            raise SpecError(said, fix)
        raise VersionsAnswerDifferently(said, fix)
    return done


_CHECKS = itertools.count(1)  # this process's instruction checks (bisect runs several)


def _result_dir(results_dir: Path) -> Path:
    """Where the check's counts go (made at the first count: a step skipped before any
    count leaves nothing)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return results_dir / RESULTS_SUBDIR / f"{stamp}-{os.getpid()}-{next(_CHECKS)}"


def write_record(
    result_dir: Path, request: RequestSpec, environment: dict[str, Any], reused: list[str],
    counts: dict[str, list[float]],
) -> None:
    """Every count so far (after each one: nothing measured is lost)."""
    result_dir.mkdir(parents=True, exist_ok=True)
    record = {
        "request": {"method": request.method, "path": request.path},
        "environment": environment,  # the machine, and the commits (app_versions)
        "reused": reused,  # versions whose counts come from an earlier check
        "instructions_per_request": counts,
    }
    staging = result_dir / "counts.json.tmp"
    staging.write_text(json.dumps(record, indent=2) + "\n")
    staging.replace(result_dir / "counts.json")


def read_record(path: Path) -> dict[str, Any] | None:
    """A kept check's counts (``write_record``'s record), or None where the file is damaged or
    of another shape."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    shaped = (
        isinstance(record, dict) and isinstance(record.get("environment"), dict)
        and isinstance(record.get("reused"), list)
        and isinstance(record.get("instructions_per_request"), dict)
        and all(isinstance(v, list) and all(isinstance(x, int | float) and x > 0 for x in v)
                for v in record["instructions_per_request"].values())
    )
    return record if shaped else None
