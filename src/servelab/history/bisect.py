"""The bisect rule, pure: which commit to measure next, and what the steps so far say.

Each step compares one commit with the good one (as `servelab check` compares a candidate
with its baseline, in interleaved rounds) and decides **same**, **slower** or
**unknown** (Chromium's Pinpoint decides three ways too): an unknown step is measured
further, with more budget (up to ``retries`` times), rather than guessed, since one noisy
step sent the wrong way sends a plain bisection to the wrong commit for good (asv's
`find` decides on one measurement). The bad end is checked first: when it is not slower
than the good one, there is no culprit to find ("no change"), and nothing else is
measured. A commit that cannot be measured at all (its app does not start, or answers
the request differently; a lock state that does not install) is **skipped**, as `git
bisect skip` does: the next step measures the nearest measurable commit to the middle
instead, and when only skipped commits are left between the last same and the first
slower one, the answer names the first slower with the skipped ones before it (any of
them may have made the change; they only run together with it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Decision = Literal["same", "slower", "unknown", "skipped"]
Ending = Literal["found", "no change", "unresolved"]


@dataclass(frozen=True)
class Step:
    commit: str
    decision: Decision
    attempt: int  # 1 for the first measurement of this commit, 2... for more
    detail: str = ""  # the figures behind it, in words
    starts: int = 0  # fresh starts of each version this attempt added to the check


@dataclass(frozen=True)
class Outcome:
    ending: Ending
    first_bad: str | None  # found: the first commit that is slower than the good one
    last_good: str | None  # the last commit known the same as the good one
    steps: tuple[Step, ...]
    # Found: the skipped commits between last_good and first_bad, oldest first; the first
    # slower one is first_bad or one of these.
    untestable: tuple[str, ...] = ()

    def summary(self, unit: str = "commit") -> str:
        """In words; ``unit``: what a step measures (a commit, a lock state)."""
        commits = len({s.commit for s in self.steps})
        tried = f"{commits} {unit}s measured in {len(self.steps)} steps"
        if self.ending == "found" and self.untestable:
            return (
                f"first slower {unit}: {self.first_bad} or one of the "
                f"{len(self.untestable)} before it that could not be measured "
                f"({', '.join(self.untestable)}), after {self.last_good}; {tried}"
            )
        if self.ending == "found":
            return f"first slower {unit}: {self.first_bad} (after {self.last_good}); {tried}"
        if self.ending == "no change":
            return f"no change: the bad end is not slower than the good one; {tried}"
        if self.first_bad is None:
            return f"unresolved: the bad end could not be measured; {tried}"
        return (
            f"unresolved between {self.last_good} (same) and {self.first_bad} (slower): a "
            f"step stayed unknown; {tried}"
        )


@dataclass
class Bisection:
    """``commits``: oldest first, the good one first and the bad one last."""

    commits: Sequence[str]
    retries: int = 1  # more measurement for an unknown step, this many times
    steps: list[Step] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.commits) < 2:
            raise ValueError("a bisection needs a good and a bad commit")
        self.low = 0  # the last commit known the same as the good one
        self.high = len(self.commits) - 1  # the first known slower (the bad one, once seen)
        self.bad_seen = False
        self.skipped: set[int] = set()  # commits that could not be measured
        self.ended: Ending | None = None

    def _measurable(self) -> list[int]:
        """The commits strictly between the last same and the first slower one that are
        not skipped, nearest the middle first."""
        middle = (self.low + self.high) // 2
        inside = [i for i in range(self.low + 1, self.high) if i not in self.skipped]
        return sorted(inside, key=lambda i: (abs(i - middle), i))

    def next(self) -> tuple[str, int] | None:
        """The commit to measure next against the good one, and which attempt it is (more
        budget for later attempts); None once the bisection has ended."""
        if self.ended is not None:
            return None
        index = self.high if not self.bad_seen else self._measurable()[0]
        commit = self.commits[index]
        attempts = sum(1 for s in self.steps if s.commit == commit)
        return commit, attempts + 1

    def tell(self, step: Step) -> None:
        self.steps.append(step)
        index = list(self.commits).index(step.commit)
        if step.decision == "skipped":
            if not self.bad_seen:  # the bad end itself cannot be measured
                self.ended = "unresolved"
                return
            self.skipped.add(index)
            if not self._measurable():
                self.ended = "found"
            return
        if step.decision == "unknown":
            if step.attempt > self.retries:  # measured as much as allowed: still unknown
                self.ended = "unresolved"
            return
        if not self.bad_seen:
            if step.decision == "same":
                self.ended = "no change"
                return
            self.bad_seen = True
        elif step.decision == "slower":
            self.high = index
        else:
            self.low = index
        if not self._measurable():
            self.ended = "found"

    def outcome(self) -> Outcome:
        ending = self.ended or "unresolved"
        if ending == "no change":
            return Outcome(ending, None, None, tuple(self.steps))
        untestable = tuple(
            self.commits[i] for i in range(self.low + 1, self.high) if i in self.skipped
        ) if ending == "found" else ()
        return Outcome(
            ending, self.commits[self.high] if self.bad_seen else None,
            self.commits[self.low], tuple(self.steps), untestable,
        )
