"""``servelab check --fail-if "instructions > +5%"``: the two versions compared on the
app's instructions per request, counted under valgrind with no load
(servelab.measuring.instructions), in place of driving the stack.

Each version is counted ``repetitions`` times, the versions in turns; the change and its
95 % interval come from Welch's test on those counts, and each threshold is judged on them
as a load check's are (servelab.analysis.thresholds). The counts hardly move between
repetitions (a tenth of a percent), so two of each decide a change a few tenths of a
percent from the limit, in a minute or two, whatever the machine's speed. A count that
does not move at all between repetitions is taken as exact.

The counts are kept in ``--results``/instructions/, one JSON file per check, written
after every count (with the commits of both versions, as a load check's environment
names them).
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from servelab.analysis.stats import Comparison, compare
from servelab.analysis.thresholds import Threshold, exit_code, judge, overall
from servelab.apps import ResolvedApp
from servelab.check import (
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
    from servelab.measuring.instructions import count, valgrind

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
        resolved = {name: _resolved(name, spec) for name, spec in specs.items()}
        versions = {CANDIDATE: describe_version(check.app.app_dir),
                    BASELINE: describe_version(where or check.app.app_dir)}
        result_dir = _result_dir(options.results_dir)
        counts: dict[str, list[float]] = {BASELINE: list(check.baseline_counts),
                                          CANDIDATE: []}
        counting = (CANDIDATE,) if check.baseline_counts else (BASELINE, CANDIDATE)
        say(f"counting instructions per request of {request.method} {request.path} under "
            f"valgrind, {repetitions} times for the {' and the '.join(counting)}"
            + ("" if len(counting) > 1 else " (the baseline's counts from before)"))
        for repetition in range(1, repetitions + 1):
            for name in counting:
                done = count(resolved[name], specs[name].env, request)
                _same_answers(name, done.statuses, request.expect_status, request)
                counts[name].append(done.per_request)
                say(f"  {name} #{repetition}: {done.per_request:,.0f} instructions per request")
                _write(result_dir, request, versions, counts)
    comparison = count_comparison(counts[BASELINE], counts[CANDIDATE])
    judgements = tuple(judge(t, comparison, 0.0, WORKLOAD) for t in thresholds)
    state = overall(judgements)
    return CheckOutcome(
        judgements, state, exit_code(state, check.inconclusive), label,
        str(check.app.app_dir or check.app.ref), result_dir, repetitions, TEST,
        time.monotonic() - started, side_by_side=False,
        counts={name: tuple(values) for name, values in counts.items()},
    )


def _resolved(name: str, spec: AppSpec) -> ResolvedApp:
    """The version's app, checked to import: the candidate's failing is a version that
    does not start (bisect skips it), the baseline's the user's --app (exit 2)."""
    from servelab.prepare.user_app import resolve_user_app

    try:
        return resolve_user_app(spec)
    except SpecError as exc:
        if name == BASELINE:
            raise
        raise VersionDidNotStart(
            name, StackStartError(exc.problem, exc.fix, detail=exc.detail)
        ) from None


def _same_answers(
    name: str, statuses: Sequence[int], expected: int, request: RequestSpec
) -> None:
    """A version must answer the request as expected: counting another answer's work
    would compare two different things."""
    if list(statuses) != [expected]:
        said = f"{request.method} {request.path}"
        raise VersionsAnswerDifferently(
            f"the {name} version answers {said} with HTTP "
            f"{', '.join(map(str, statuses))}, not {expected}",
            "check both with a request they answer alike (--method, --path, --expect-status)",
        )


def _result_dir(results_dir: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = results_dir / RESULTS_SUBDIR / f"{stamp}-{os.getpid()}"
    path.mkdir(parents=True, exist_ok=False)
    return path


def _write(
    result_dir: Path, request: RequestSpec, versions: dict[str, dict[str, object]],
    counts: dict[str, list[float]],
) -> None:
    """Every count so far (after each one: nothing measured is lost)."""
    record = {
        "request": {"method": request.method, "path": request.path},
        "app_versions": versions,
        "instructions_per_request": counts,
    }
    staging = result_dir / "counts.json.tmp"
    staging.write_text(json.dumps(record, indent=2) + "\n")
    staging.replace(result_dir / "counts.json")
