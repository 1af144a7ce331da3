"""The bisect rule, pure: which commit to measure next, and what the steps so far say.

Each step compares one commit with the good one (as `servelab check` compares a candidate
with its baseline, in interleaved rounds) and decides **same**, **slower** or
**unknown** (Chromium's Pinpoint decides three ways too): an unknown step is measured
again with more budget (up to ``retries`` times) rather than guessed, since one noisy
step sent the wrong way sends a plain bisection to the wrong commit for good (asv's
`find` decides on one measurement). The bad end is checked first: when it is not slower
than the good one, there is no culprit to find ("no change"), and nothing else is
measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Decision = Literal["same", "slower", "unknown"]
Ending = Literal["found", "no change", "unresolved"]


@dataclass(frozen=True)
class Step:
    commit: str
    decision: Decision
    attempt: int  # 1 for the first measurement of this commit, 2... for more
    detail: str = ""  # the figures behind it, in words
    starts: int = 0  # fresh starts of each version the step's check measured


@dataclass(frozen=True)
class Outcome:
    ending: Ending
    first_bad: str | None  # found: the first commit that is slower than the good one
    last_good: str | None  # the last commit known the same as the good one
    steps: tuple[Step, ...]

    def summary(self, unit: str = "commit") -> str:
        """In words; ``unit``: what a step measures (a commit, a lock state)."""
        commits = len({s.commit for s in self.steps})
        tried = f"{commits} {unit}s measured in {len(self.steps)} steps"
        if self.ending == "found":
            return f"first slower {unit}: {self.first_bad} (after {self.last_good}); {tried}"
        if self.ending == "no change":
            return f"no change: the bad end is not slower than the good one; {tried}"
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
        self.ended: Ending | None = None

    def next(self) -> tuple[str, int] | None:
        """The commit to measure next against the good one, and which attempt it is (more
        budget for later attempts); None once the bisection has ended."""
        if self.ended is not None:
            return None
        index = self.high if not self.bad_seen else (self.low + self.high) // 2
        commit = self.commits[index]
        attempts = sum(1 for s in self.steps if s.commit == commit)
        return commit, attempts + 1

    def tell(self, step: Step) -> None:
        self.steps.append(step)
        index = list(self.commits).index(step.commit)
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
        if self.high - self.low <= 1:
            self.ended = "found"

    def outcome(self) -> Outcome:
        ending = self.ended or "unresolved"
        if ending == "no change":
            return Outcome(ending, None, None, tuple(self.steps))
        return Outcome(
            ending, self.commits[self.high] if self.bad_seen else None,
            self.commits[self.low], tuple(self.steps),
        )
