"""``servelab check``: did this version of the app get slower, for real?

Two versions of the user's app (a baseline directory, or a git revision checked out
into a temporary worktree, against the app dir) are served by the same stack and
measured in interleaved slices, side by side where each version's stack gets CPUs of
its own, else in turns (the caller decides, as for ``servelab study quick``:
``api.in_turns_because``), until one threshold is crossed (the check has failed; more
rounds would not change that), every threshold is decided
(``servelab.analysis.thresholds``) or the budget is spent. The answer is an exit code
CI understands: 0 no threshold crossed, 1 one crossed (with confidence), 10 still
inconclusive (``--inconclusive pass`` makes that 0).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab.analysis.thresholds import (
    Judgement,
    Threshold,
    exit_code,
    judge,
    overall,
    parse_threshold,
)
from servelab.apps import BUILTIN_APPS
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
from servelab.config.experiment import Experiment
from servelab.config.run import RunOptions, UserApp
from servelab.config.stack import AppSpec, StackSpec
from servelab.config.thresholds import COUNTED
from servelab.errors import SpecError, StackStartError
from servelab.prepare.replay import WHOLE_REPLAYS
from servelab.results.records import RunRecord

if TYPE_CHECKING:
    from servelab.api import Prepared

DEFAULT_BUDGET_S = 180.0
# Seconds each version is driven per round: side by side both at once; in turns one
# after the other, half as long each, so that a round takes as long either way.
SIDE_BY_SIDE_DURATION_S = 6.0
IN_TURNS_DURATION_S = 3.0
def parse_thresholds(texts: Sequence[str]) -> tuple[Threshold, ...]:
    """The thresholds (SpecError, one line, for one that is not)."""
    parsed = []
    for text in texts:
        try:
            parsed.append(parse_threshold(text))
        except ValueError as exc:
            raise SpecError(str(exc), "see `servelab check --help` for --fail-if") from None
    return tuple(parsed)


def check_stacks(check: CheckSpec, baseline_dir: Path | None) -> tuple[dict[str, Any], ...]:
    """The two versions' stacks (baseline, candidate): the same server and front, each
    its own app."""
    from servelab.studies.seeds import SEED_PROXY, SEED_SERVER

    candidate = check_app(check).model_dump(mode="json")
    baseline = {**candidate, "app_dir": str(baseline_dir) if baseline_dir else None}
    if check.baseline_python is not None:
        baseline["python"] = str(check.baseline_python)
    server = {**SEED_SERVER, **(check.server or {})}
    return (
        {"name": BASELINE, "app": baseline, "server": server, "proxy": SEED_PROXY},
        {"name": CANDIDATE, "app": candidate, "server": server, "proxy": SEED_PROXY},
    )


def check_experiment(
    check: CheckSpec, baseline_dir: Path | None, *, side_by_side: bool = True
) -> Experiment:
    """Both versions on one stack, side by side or in turns, with the thresholds as
    stopping rule: its shapes checked here, its plug-ins' rules once, by ``api.prepare``."""
    from servelab.config.experiment import build_experiment

    request = check_request(check)
    baseline, candidate = check_stacks(check, baseline_dir)
    return build_experiment(
        {
            "name": "check",
            "baseline": baseline,
            "variants": [{"name": CANDIDATE, "app": candidate["app"]}],
            "workloads": [{"name": "app", "replay": check.replay.model_dump(mode="json")}]
            if check.replay is not None else [{
                "name": "app",
                "request": request.model_dump(),
                "load": {"concurrency": check.concurrency, "duration_s": check.duration_s or (
                    SIDE_BY_SIDE_DURATION_S if side_by_side else IN_TURNS_DURATION_S
                )},
            }],
            # Two rounds of fresh starts first (the fewest a nested interval takes); the
            # stopping rule adds rounds while a threshold is undecided. A replay is never
            # sliced, and the stopping rule adds interleaved slices: three whole replays
            # of each version, in turns, instead.
            "repetitions": 2 if check.replay is None else WHOLE_REPLAYS,
            "warmup": {"max_rounds": 1, "duration_s": 1.0},
            "side_by_side": side_by_side and check.replay is None,
            # Instruction thresholds are counted with no load (check.instructions): a
            # check names them alone, and its experiment only says how stacks would run.
            **({} if check.replay is not None else {"stopping": {
                "budget_s": DEFAULT_BUDGET_S,
                "thresholds": [t for t in check.thresholds if _under_load(t)],
            }}),
        },
        source="servelab check",
    )


def _under_load(threshold: str) -> bool:
    """Whether a threshold is judged on load (not counted); one that does not parse is
    left to the experiment's validation, which says what is wrong with it."""
    try:
        return parse_threshold(threshold).metric not in COUNTED
    except ValueError:
        return True


def probe_both(experiment: Experiment, timeout_s: float) -> None:
    """Launch each version and send the request: SpecError (exit 2) when the two answer
    it differently, before anything is measured."""
    from servelab.launch import launch_stack
    from servelab.prepare.user_app import answered_status

    request = experiment.workloads[0].request
    answers: dict[str, int | None] = {}
    failures: dict[str, StackStartError] = {}
    for stack in experiment.stacks:
        try:
            with launch_stack(stack, probe=request, startup_timeout_s=timeout_s):
                answers[stack.name] = request.expect_status
        except StackStartError as exc:
            answers[stack.name] = answered_status(exc)
            failures[stack.name] = exc
    said = f"{request.method} {request.path}"
    if answers[BASELINE] != answers[CANDIDATE] and None not in answers.values():
        raise VersionsAnswerDifferently(
            f"the two versions answer {said} differently: baseline HTTP {answers[BASELINE]}, "
            f"candidate HTTP {answers[CANDIDATE]}",
            "check both with the same request (--method, --path, --expect-status); a check "
            "compares the speed of versions that answer alike",
        )
    for name in (BASELINE, CANDIDATE):
        if name in failures:
            raise VersionDidNotStart(name, failures[name])


def judge_runs(
    experiment: Experiment, runs: Sequence[RunRecord], thresholds: Sequence[Threshold]
) -> tuple[tuple[Judgement, ...], int, str]:
    """Each threshold on each workload of a check's runs; starts per version; the test."""
    from servelab.analysis.analyze import analyze, threshold_comparison

    judgements = []
    starts, tests = 0, set()
    for variant in analyze(experiment, runs).variants:
        if variant.variant != CANDIDATE:
            continue
        errors = sum(run.load.errors for run in variant.runs)
        for threshold in thresholds:
            comparison = threshold_comparison(experiment, variant, threshold.metric)
            judgements.append(judge(threshold, comparison, float(errors), variant.workload))
            if comparison is not None:
                tests.add(comparison.test)
                starts = max(starts, *(comparison.starts or (len(variant.runs),)))
    return tuple(judgements), starts, " / ".join(sorted(tests)) or "none"


def measuring_options(check: CheckSpec, options: RunOptions) -> RunOptions:
    """``options`` for measuring ``check``: its versions in turns, and said under the
    session's first line, where their stacks would share CPUs (as quick decides);
    unchanged for a check that counts instructions (no stack runs). A bad threshold, or
    load and instruction thresholds mixed, is a SpecError here, before anything is built."""
    from servelab import api
    from servelab.check.instructions import counted

    if counted(parse_thresholds(check.thresholds)):
        return options
    if check.replay is not None:
        return replace(options, side_by_side=False, notes=(
            *options.notes, "a replayed log is measured in turns: its latency is judged",
        ))
    if options.side_by_side is not None:  # --side-by-side / --in-turns decided
        return options
    stacks = [StackSpec.model_validate(stack) for stack in check_stacks(check, None)]
    in_turns = api.sharing_note(stacks, api.cpu_plan_of(options))
    if not in_turns:
        return options
    return replace(options, side_by_side=False, notes=(*options.notes, in_turns))


def run_check(
    check: CheckSpec,
    options: RunOptions,
    *,
    say: Callable[[str], None],
    measure: Callable[[Prepared], Path],
    startup_timeout_s: float = 30.0,
) -> CheckOutcome:
    """Measure both versions (``measure``: run the prepared experiment, return its result
    dir) and judge every threshold. ``startup_timeout_s``: how long the start-up check
    waits for each version's answer."""
    from servelab import api
    from servelab.apps.interpreter import with_app_python
    from servelab.check.versions import baseline_version, describe_version

    thresholds = parse_thresholds(check.thresholds)
    started = time.monotonic()
    if check.baseline_dir is None and check.baseline_ref is None and (
        check.app.ref.strip() not in BUILTIN_APPS
    ):
        raise SpecError(
            "servelab check needs the baseline version of your app",
            "give --baseline-dir DIR or --baseline-ref REV (a git branch, tag or commit)",
        )
    from servelab.check.instructions import counted, run_instruction_check

    if counted(thresholds):  # no load: the app's instructions per request, counted
        return run_instruction_check(check, thresholds, options, say=say)
    app, note = with_app_python(check.app)  # one Python for both versions
    if note:
        say(note)
    check = replace(check, app=app)
    with baseline_version(check.app, check.baseline_dir, check.baseline_ref) as (where, label):
        # The run's options applied and everything checked once (api.prepare), each
        # version's server fitted to its app there, before either version starts.
        ready = api.prepare(
            check_experiment(check, where, side_by_side=options.side_by_side is not False),
            options, UserApp(startup_timeout_s=startup_timeout_s), say=say,
            fit=lambda experiment: _fitted(experiment, say),
        )
        probe_both(ready.experiment, startup_timeout_s)
        versions = {
            CANDIDATE: describe_version(check.app.app_dir),
            BASELINE: describe_version(where or check.app.app_dir),
        }
        if check.baseline_python is not None:  # two environments: history leaves it out
            versions[CANDIDATE]["python"] = str(check.app.python)
            versions[BASELINE]["python"] = str(check.baseline_python)
        result_dir = measure(replace(ready, setup={**ready.setup, "app_versions": versions}))
    from servelab.results.store import ResultStore

    store = ResultStore.open(result_dir)
    runs = store.runs()
    judgements, starts, test = judge_runs(store.experiment, runs, thresholds)
    state = overall(judgements)
    why, flame = why_candidate(runs, store.path, draw=state == "crossed")
    stopping = store.experiment.stopping  # the budget it had (a replay has none)
    return CheckOutcome(
        judgements, state, exit_code(state, check.inconclusive), label,
        candidate_label(check.app, versions[CANDIDATE]), result_dir, starts, test,
        time.monotonic() - started, tuple(why), store.experiment.side_by_side, flame,
        store.id, budget_s=stopping.budget_s if stopping is not None else None,
    )


def candidate_label(app: AppSpec, version: dict[str, object]) -> str:
    """How the summary names the candidate: its app dir (or app), and its commit when the
    app dir is in a git repository ("with changes" for uncommitted ones)."""
    label = str(app.app_dir or app.ref)
    commit = version.get("commit")
    if not isinstance(commit, str):
        return label
    return f"{label} at {commit[:10]}" + (" with changes" if version.get("dirty") else "")


def why_candidate(
    runs: Sequence[RunRecord], result_dir: Path, *, draw: bool = False
) -> tuple[list[str], str | None]:
    """With --profile: the candidate's CPU per request against the baseline's, by part and
    by the functions that changed most, with 95 % intervals; with ``draw``, also its
    differential flame graph (SVG: red where the candidate's CPU per request grew). Empty
    and None without profiles of both versions."""
    from servelab.analysis.explain import explain_all, why_lines
    from servelab.analysis.profile import mean_stacks, run_profiles
    from servelab.report.flames import flame_svg
    from servelab.results.profiles import read_profiles

    profiles = run_profiles(runs, read_profiles(result_dir, runs))
    lines = [line for e in explain_all(profiles, BASELINE) for line in why_lines(e)]
    mine, theirs = ([p for p in profiles if p.variant == name] for name in (CANDIDATE, BASELINE))
    if not (draw and mine and theirs):
        return lines, None
    return lines, flame_svg(
        mean_stacks(mine), mean_stacks(theirs), title=f"{CANDIDATE} vs {BASELINE}"
    )


def _fitted(experiment: Experiment, say: Callable[[str], None]) -> Experiment:
    """Each stack's server fitted to its app (gunicorn's worker class to WSGI/ASGI). A
    candidate whose app does not import where the baseline's does is a version that does
    not start (VersionDidNotStart: bisect skips it); the baseline's failing is the
    user's --app or environment (SpecError, exit 2), as for any study."""
    from servelab.prepare.user_app import fit_stack, resolve_user_app

    stacks = []
    for stack in experiment.stacks:  # the baseline first
        try:
            resolved = resolve_user_app(stack.app)
        except SpecError as exc:
            if stack.name == BASELINE:
                raise
            raise VersionDidNotStart(
                stack.name, StackStartError(exc.problem, exc.fix, detail=exc.detail)
            ) from None
        fitted, note = fit_stack(stack, stack.app, resolved)
        stacks.append(fitted)
        if note and stack.name == BASELINE:
            say(note.replace(f"{BASELINE}: ", "both versions: ", 1))
    return experiment.with_stacks(stacks)
