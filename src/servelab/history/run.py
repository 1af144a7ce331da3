"""`servelab bisect` for real: the commits from the good revision to the bad one, each
step a `servelab check` of one commit (its own temporary worktree) against the good one
(one worktree for the whole bisection), its verdict read as same (held), slower
(crossed) or unknown (inconclusive: the same check measured further for twice the last
budget, its rounds kept, so the second look judges all of them); a commit
whose app does not start, or answers the request otherwise than the good one, is
skipped (history.bisect). The user's checkout is never touched (check.versions:
detached worktrees, removed afterwards).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from servelab.check import BASELINE, CANDIDATE, CheckOutcome, CheckSpec, run_check
from servelab.check.versions import (
    git,
    git_worktree,
    repository_of,
    require_clean,
    resolve_revision,
)
from servelab.config.run import RunOptions
from servelab.errors import SpecError
from servelab.history.bisect import Bisection, Decision, Outcome, Step

DEFAULT_STEP_BUDGET_S = 90.0  # a step's first check; each retry goes on for twice the last
DECISIONS: dict[str, Decision] = {"held": "same", "crossed": "slower", "inconclusive": "unknown"}
EXIT_CODES = {"no change": 0, "found": 1, "unresolved": 10}  # as check's pass/fail/unknown


@dataclass(frozen=True)
class BisectSpec:
    check: CheckSpec  # the app (its app_dir in the repository), thresholds, stack, request
    good: str
    bad: str
    retries: int = 1


def commits_between(repo: Path, good: str, bad: str) -> list[str]:
    """The good commit, then every commit on the path from it to the bad one, oldest
    first (first parents only: a merged branch is one step, as `git bisect
    --first-parent`); SpecError when the bad one does not descend from the good one."""
    if git(repo, "merge-base", "--is-ancestor", good, bad).returncode != 0:
        raise SpecError(
            f"the bad revision {bad[:10]} does not descend from the good one {good[:10]}",
            "give --good an ancestor of --bad (git log --oneline --graph)",
        )
    done = git(repo, "rev-list", "--reverse", "--first-parent", "--ancestry-path",
               f"{good}..{bad}")
    path = done.stdout.split()
    if not path:
        raise SpecError("--good and --bad name the same commit", "give two different commits")
    return [good, *path]


def run_bisect(
    spec: BisectSpec,
    options: RunOptions,
    *,
    say: Callable[[str], None],
    measure: Callable[[Any], Path],
    startup_timeout_s: float = 30.0,
    on_step: Callable[[Step, CheckOutcome | None], None] = lambda step, outcome: None,
) -> Outcome:
    """Bisect ``spec.good``..``spec.bad``; ``measure`` runs each step's prepared check
    (as `servelab check` does)."""
    app_dir = (spec.check.app.app_dir or Path.cwd()).resolve()
    try:
        repo = repository_of(app_dir)
    except SpecError as exc:
        raise SpecError(
            exc.problem.replace("--baseline-ref", "servelab bisect"),
            "run it on an app in a git repository (--app-dir)",
        ) from None
    good = resolve_revision(repo, spec.good)
    bad = resolve_revision(repo, spec.bad)
    require_clean(repo)
    commits = commits_between(repo, good, bad)
    say(f"bisecting {len(commits) - 1} commits from {spec.good} ({good[:10]}) to {spec.bad} "
        f"({bad[:10]}): each step a check against the good one")
    bisection = Bisection(commits, retries=spec.retries)
    relative = app_dir.relative_to(repo)
    good_counts = GoodCounts(on_step)
    with git_worktree(repo, good) as good_tree:
        while (asked := bisection.next()) is not None:
            commit = asked[0]
            # One worktree per commit, kept while the commit is measured further: a retry
            # extends the same check, so the same app dir.
            with git_worktree(repo, commit) as tree:
                check = replace(
                    spec.check,
                    app=spec.check.app.model_copy(update={"app_dir": tree / relative}),
                    baseline_dir=good_tree / relative, baseline_ref=None,
                    baseline_counts=good_counts.counts,
                )
                _measure_until_told(bisection, commit, check, options, say, measure,
                                    startup_timeout_s, good_counts.told)
    return bisection.outcome()


@dataclass
class GoodCounts:
    """The good version's instruction counts, kept from the first step that counted them
    (instruction thresholds: every step's baseline is the same good version, and its count
    does not move with the machine, so it is counted once); passes each step on."""

    on_step: Callable[[Step, CheckOutcome | None], None]
    counts: tuple[float, ...] = ()

    def told(self, step: Step, outcome: CheckOutcome | None) -> None:
        if outcome is not None and outcome.counts and not self.counts:
            self.counts = outcome.counts[BASELINE]
        self.on_step(step, outcome)


def _measure_until_told(
    bisection: Bisection, name: str, check: CheckSpec, options: RunOptions,
    say: Callable[[str], None], measure: Callable[[Any], Path], startup_timeout_s: float,
    on_step: Callable[[Step, CheckOutcome | None], None],
) -> None:
    """Steps of one commit (or lock state) until the bisection asks for another: an
    unknown step's check is measured further (its rounds kept) while retries are left."""
    before: CheckOutcome | None = None
    attempt = 1
    while True:
        step, outcome = _measured_or_skipped(
            name, attempt, check, options, say, measure, startup_timeout_s, before
        )
        bisection.tell(step)
        on_step(step, outcome)
        if bisection.next() != (name, attempt + 1):
            return
        before, attempt = outcome, attempt + 1


def _measured_or_skipped(
    name: str, attempt: int, check: CheckSpec, options: RunOptions,
    say: Callable[[str], None], measure: Callable[[Any], Path], startup_timeout_s: float,
    before: CheckOutcome | None = None,
) -> tuple[Step, CheckOutcome | None]:
    """The step's check; skipped (no outcome) when the candidate cannot be measured: it
    does not start, or answers otherwise than the good one. The good one not starting
    ends the bisection (VersionDidNotStart propagates): no step could be measured."""
    from servelab.check import VersionDidNotStart, VersionsAnswerDifferently

    try:
        return _checked_step(name, attempt, check, options, say, measure, startup_timeout_s,
                             before)
    except (VersionDidNotStart, VersionsAnswerDifferently) as exc:
        if isinstance(exc, VersionDidNotStart) and exc.version != CANDIDATE:
            raise
        return Step(name, "skipped", attempt, exc.one_line()), None


def _checked_step(
    name: str, attempt: int, check: CheckSpec, options: RunOptions,
    say: Callable[[str], None], measure: Callable[[Any], Path], startup_timeout_s: float,
    before: CheckOutcome | None = None,
) -> tuple[Step, CheckOutcome]:
    """One bisection step: ``check`` run with the step's budget (--budget, default
    DEFAULT_STEP_BUDGET_S, twice the last for each later attempt), read as a Step. A later
    attempt measures ``before``'s check further (RunOptions.extend_id): its verdict is on
    the rounds of every attempt, and the step counts the starts it added."""
    budget = (options.budget_s or DEFAULT_STEP_BUDGET_S) * 2 ** (attempt - 1)
    extended = None if before is None else before.experiment_id
    outcome = run_check(check, replace(options, budget_s=budget, extend_id=extended), say=say,
                        measure=measure, startup_timeout_s=startup_timeout_s)
    added = outcome.starts - (before.starts if before is not None else 0)
    step = Step(name, DECISIONS[outcome.state], attempt, _detail(outcome), added)
    return step, outcome


def _detail(outcome: CheckOutcome) -> str:
    """The step's figures in words: each threshold's change and interval."""
    return "; ".join(
        f"{j.threshold.text}: {j.state} ({j.reason})" for j in outcome.judgements
    )


@dataclass(frozen=True)
class LockBisectSpec:
    check: CheckSpec  # the app (one code for every state), thresholds, stack, request
    good_lock: Path
    bad_lock: Path
    wheelhouse: Path | None = None  # pip --no-index --find-links; None: pip's index
    retries: int = 1


def run_lock_bisect(
    spec: LockBisectSpec,
    options: RunOptions,
    *,
    say: Callable[[str], None],
    measure: Callable[[Any], Path],
    startup_timeout_s: float = 30.0,
    on_step: Callable[[Step, CheckOutcome | None], None] = lambda step, outcome: None,
) -> Outcome:
    """Bisect the differences between two lock files (``history.locks``): each step a
    check of one lock state's environment against the good lock's, the same code in
    both. A state that does not install, start or answer alike is skipped (changes that
    only work together: the answer names the first slower state with the skipped ones
    before it)."""
    from servelab.history.environments import LockInstallError, lock_environments
    from servelab.history.locks import lock_changes, lock_state, read_lock, state_label

    if spec.wheelhouse is not None and not spec.wheelhouse.is_dir():
        raise SpecError(f"--wheelhouse {spec.wheelhouse} is not a directory",
                        "give the directory of wheels (pip download -d DIR ...)")
    good, bad = read_lock(spec.good_lock), read_lock(spec.bad_lock)
    changes = lock_changes(good, bad)
    if not changes:
        raise SpecError(f"{spec.good_lock} and {spec.bad_lock} pin the same versions",
                        "give two different lock files")
    labels = [state_label(changes, applied) for applied in range(len(changes) + 1)]
    say(f"bisecting {len(changes)} changes from {spec.good_lock} to {spec.bad_lock}: each "
        "step a check of one lock state against the good lock")
    bisection = Bisection(labels, retries=spec.retries)
    good_counts = GoodCounts(on_step)
    with lock_environments(spec.wheelhouse, say) as environments:
        try:
            good_python = environments.python(0, lock_state(good, changes, 0))
        except LockInstallError as exc:
            raise SpecError(f"the good lock does not install: {exc.problem}", exc.fix,
                            detail=exc.detail) from None
        while (asked := bisection.next()) is not None:
            label, attempt = asked
            applied = labels.index(label)
            try:
                python = environments.python(applied, lock_state(good, changes, applied))
            except LockInstallError as exc:
                step = Step(label, "skipped", attempt, exc.one_line())
                bisection.tell(step)
                on_step(step, None)
                continue
            check = replace(
                spec.check, app=spec.check.app.model_copy(update={"python": python}),
                baseline_dir=spec.check.app.app_dir or Path.cwd(), baseline_ref=None,
                baseline_python=good_python, baseline_counts=good_counts.counts,
            )
            _measure_until_told(bisection, label, check, options, say, measure,
                                startup_timeout_s, good_counts.told)
    return bisection.outcome()
