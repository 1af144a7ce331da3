"""The bisect rule on simulated repositories with a known culprit (or none): each step a
check of one commit against the good one, deciding same / slower / unknown from a noisy
estimate, more budget on an unknown step."""

from __future__ import annotations

import random

import pytest

from servelab.history.bisect import Bisection, Step

THRESHOLD = 0.05  # what a check fails on: 5 % slower


def _check(effect: float, attempt: int, noise: float, rng: random.Random) -> str:
    """A check's three-way decision on a difference ``effect`` (0.10: 10 % slower), as
    analysis.thresholds.judge makes it: its 95 % interval entirely beyond the threshold
    (crossed: slower), entirely within it (held: same), or straddling it (unknown). The
    estimate's standard error halves with four times the budget (each attempt doubles
    it)."""
    se = noise / (2 ** ((attempt - 1) / 2))
    estimate = rng.gauss(effect, se)
    low, high = estimate - 1.96 * se, estimate + 1.96 * se
    if low > THRESHOLD:
        return "slower"
    if high <= THRESHOLD:
        return "same"
    return "unknown"


def _bisect(n: int, culprit: int | None, effect: float, noise: float, seed: int):
    rng = random.Random(seed)
    commits = [f"c{i:02d}" for i in range(n)]
    bisection = Bisection(commits, retries=2)
    while (asked := bisection.next()) is not None:
        commit, attempt = asked
        index = commits.index(commit)
        truth = effect if culprit is not None and index >= culprit else 0.0
        bisection.tell(Step(commit, _check(truth, attempt, noise, rng), attempt))
    return bisection.outcome()


def test_the_culprit_is_found_in_about_log2_steps() -> None:
    found = [_bisect(40, 23, 0.10, 0.02, seed) for seed in range(100)]
    assert sum(o.ending == "found" and o.first_bad == "c23" for o in found) >= 97
    assert all(o.last_good == "c22" for o in found if o.ending == "found")
    steps = sorted(len(o.steps) for o in found)
    assert steps[50] <= 9  # 1 for the bad end + log2(40) = 5.3, more for unknown steps


def test_an_unknown_step_is_measured_again_not_guessed() -> None:
    commits = ["good", "a", "b", "bad"]
    bisection = Bisection(commits, retries=1)
    assert bisection.next() == ("bad", 1)
    bisection.tell(Step("bad", "slower", 1))
    assert bisection.next() == ("a", 1)
    bisection.tell(Step("a", "unknown", 1))
    assert bisection.next() == ("a", 2)  # the same commit, more budget
    bisection.tell(Step("a", "same", 2))
    assert bisection.next() == ("b", 1)
    bisection.tell(Step("b", "slower", 1))
    outcome = bisection.outcome()
    assert (outcome.ending, outcome.first_bad, outcome.last_good) == ("found", "b", "a")
    assert outcome.summary().startswith("first slower commit: b (after a); 3 commits")


def test_unknown_beyond_its_retries_is_unresolved_with_the_range() -> None:
    bisection = Bisection(["good", "a", "b", "bad"], retries=1)
    bisection.tell(Step("bad", "slower", 1))
    bisection.tell(Step("a", "unknown", 1))
    bisection.tell(Step("a", "unknown", 2))
    assert bisection.next() is None
    outcome = bisection.outcome()
    assert outcome.ending == "unresolved"
    assert (outcome.last_good, outcome.first_bad) == ("good", "bad")
    assert "unresolved between good (same) and bad (slower)" in outcome.summary()


def test_no_culprit_says_no_change_after_one_step() -> None:
    outcomes = [_bisect(40, None, 0.0, 0.02, seed) for seed in range(100)]
    assert sum(o.ending == "no change" for o in outcomes) >= 97
    assert all(len(o.steps) <= 3 for o in outcomes)  # the bad end, measured more if unknown


def test_a_bisection_needs_two_commits() -> None:
    with pytest.raises(ValueError):
        Bisection(["only"])


def test_a_commit_that_cannot_be_measured_is_skipped_and_its_neighbour_measured() -> None:
    commits = ["good", "a", "b", "c", "d", "bad"]
    bisection = Bisection(commits, retries=1)
    bisection.tell(Step("bad", "slower", 1))
    assert bisection.next() == ("b", 1)  # the middle of good..bad
    bisection.tell(Step("b", "skipped", 1, "the candidate version: gunicorn exited"))
    assert bisection.next() == ("a", 1)  # the nearest measurable one to the middle
    bisection.tell(Step("a", "same", 1))
    assert bisection.next() == ("c", 1)  # b is never measured again
    bisection.tell(Step("c", "slower", 1))
    outcome = bisection.outcome()
    assert (outcome.ending, outcome.first_bad, outcome.last_good) == ("found", "c", "a")
    # Only b, skipped, lies between a (same) and c (slower): either may be the culprit.
    assert outcome.untestable == ("b",)
    assert outcome.summary().startswith(
        "first slower commit: c or one of the 1 before it that could not be measured (b), "
        "after a; 4 commits measured in 4 steps"
    )


def test_skipped_commits_beside_the_culprit_keep_the_search_going() -> None:
    commits = [f"c{i}" for i in range(10)]
    culprit, broken = 6, {4, 5, 7}
    bisection = Bisection(commits, retries=1)
    while (asked := bisection.next()) is not None:
        commit, attempt = asked
        index = commits.index(commit)
        decision = "skipped" if index in broken else ("slower" if index >= culprit else "same")
        bisection.tell(Step(commit, decision, attempt))
    outcome = bisection.outcome()
    assert outcome.ending == "found" and outcome.first_bad == "c6"
    assert outcome.last_good == "c3" and outcome.untestable == ("c4", "c5")
    assert not any(s.commit == "c7" for s in outcome.steps)  # never needed


def test_a_bad_end_that_cannot_be_measured_is_unresolved() -> None:
    bisection = Bisection(["good", "a", "bad"])
    bisection.tell(Step("bad", "skipped", 1, "the candidate version: exited"))
    assert bisection.next() is None
    outcome = bisection.outcome()
    assert outcome.ending == "unresolved" and outcome.first_bad is None
    assert outcome.summary().startswith("unresolved: the bad end could not be measured")
