"""The race's answer, once its rounds say who is still in (``tune/race.py``): the candidate
recommended, or why none is yet (the leaders the starts cannot tell apart, and the rounds
that would), and the finalists ``tune --profile`` profiles. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from servelab.analysis.nested import starts_needed
from servelab.results.records import RunRecord
from servelab.tune.objective import Objective
from servelab.tune.race import RaceSettings, RaceState, Standing, best_first, within_tie


@dataclass(frozen=True)
class Recommendation:
    candidate: str | None  # None: no candidate keeps the limits, or the leaders are not told apart
    reason: str
    winner: str | None
    runner_up: str | None
    # The leaders the starts so far cannot tell apart (the leader first); a recommendation
    # then waits for the rounds (``more_rounds``, None: unknown) that would separate them.
    indistinguishable: tuple[str, ...] = ()
    more_rounds: int | None = None


def recommend(
    state: RaceState,
    objective: Objective,
    settings: RaceSettings = RaceSettings(),  # noqa: B008 (frozen: race.py's)
    *,
    seconds_per_start: float | None = None,
    spent_s: float | None = None,
) -> Recommendation:
    """The leader, once every other candidate keeping the limits is told apart from it:
    significantly worse, or tied (its 95 % interval against the leader within
    ±``tie_pct``; then the one of the tied that uses the least memory). A contender that
    is neither (too few starts, or an interval still wider than the tie) makes the
    leaders indistinguishable: no recommendation, but which they are and how many more
    rounds (at ``seconds_per_start``, after ``spent_s``, the budget) would separate them."""
    keeping = [s for s in state.standings if s.meets_limits]
    if not keeping:
        limits = ", ".join(objective.limit_texts())
        return Recommendation(
            None, f"no candidate kept the limits ({limits}) on average", None, None
        )
    winner = keeping[0]
    if len(keeping) == 1:
        return Recommendation(winner.candidate, "the only candidate left that keeps the limits",
                              winner.candidate, None)
    label = objective.metric.label.lower()
    leads = bool(state.standings) and state.standings[0].candidate == winner.candidate
    tied, undecided = [], []
    for other in keeping[1:]:
        versus = other.versus_leader if leads else None
        if versus is not None and versus.verdict == "worse":
            continue
        if versus is not None and within_tie(versus, settings.tie_pct):
            tied.append(other)
        else:
            undecided.append(other)
    second = keeping[1]
    if undecided:
        return _indistinguishable(winner, undecided, state, settings, label,
                                  seconds_per_start, spent_s)
    if not tied:
        versus = second.versus_leader
        said = (f"{label} {versus.difference_pct:+.1f} % for the runner-up {second.candidate} "
                f"({versus.verdict})" if versus is not None and versus.difference_pct is not None
                else f"the runner-up {second.candidate} is significantly worse")
        return Recommendation(winner.candidate, f"the best: {said}", winner.candidate,
                              second.candidate)
    cheapest = min(tied, key=lambda s: s.memory_mib)
    tie = ", ".join(f"{s.candidate} {_against(s, winner)}" for s in tied)
    if cheapest.memory_mib < winner.memory_mib:
        return Recommendation(
            cheapest.candidate,
            f"tied with the leader {winner.candidate} (within ±{settings.tie_pct:g} %: "
            f"{_against(cheapest, winner)}) and uses "
            f"{winner.memory_mib - cheapest.memory_mib:.0f} MiB less memory",
            winner.candidate,
            cheapest.candidate,
        )
    return Recommendation(
        winner.candidate,
        f"the leader; tied within ±{settings.tie_pct:g} % ({label}: {tie}), but "
        f"{'it uses' if len(tied) == 1 else 'they use'} more memory",
        winner.candidate,
        second.candidate,
    )


def _against(standing: Standing, leader: Standing) -> str:
    """'-1.2 % (-3.4 … +1.0 %)' against the leader; without a comparison (fewer than two
    starts), the means' difference."""
    versus = standing.versus_leader
    if versus is None or versus.difference_pct is None:
        if not leader.mean:
            return "not compared"
        return f"{100 * (standing.mean / leader.mean - 1):+.1f} % (no interval yet)"
    bounds = versus.interval_pct
    text = f"{versus.difference_pct:+.1f} %"
    return text + (f" ({bounds[0]:+.1f} … {bounds[1]:+.1f} %)" if bounds is not None else "")


def rounds_to_separate(standing: Standing, tie_pct: float) -> int | None:
    """More starts of each (rounds) for ``standing``'s interval against the leader to tell
    them apart, if the spread stays as measured: narrow enough to lie beyond 0 (worse)
    or within ±``tie_pct`` (tied), whichever comes first; None without an interval."""
    versus = standing.versus_leader
    bounds = None if versus is None else versus.interval_pct
    if bounds is None:
        return None
    centre, half = (bounds[0] + bounds[1]) / 2, (bounds[1] - bounds[0]) / 2
    target = max(abs(centre), tie_pct - abs(centre))
    starts = max(versus.starts or (standing.starts,)) if versus is not None else standing.starts
    needed = starts_needed(half, starts, target)
    return None if needed is None else max(needed - starts, 1)


def _indistinguishable(
    winner: Standing,
    undecided: Sequence[Standing],
    state: RaceState,
    settings: RaceSettings,
    label: str,
    seconds_per_start: float | None,
    spent_s: float | None,
) -> Recommendation:
    names = (winner.candidate, *(s.candidate for s in undecided))
    starts = min(s.starts for s in (winner, *undecided))
    needs = [rounds_to_separate(s, settings.tie_pct) for s in undecided]
    if all(n is not None for n in needs):
        more: int | None = max(n for n in needs if n is not None)
        how = f"about {more} more round(s) of fresh starts"
    else:  # one start says nothing about how much starts differ: three give an interval
        more = max(3 - starts, 1)
        how = f"at least {more} more round(s) (three starts each give an interval)"
    if seconds_per_start and more is not None:
        extra = more * len(state.alive) * seconds_per_start
        total = (spent_s or 0.0) + extra
        how += (f", ~{extra / 60:.1f} more minutes of measuring (run again with --budget "
                f"{math.ceil(total / 60)}m)")
    shown = ", ".join(f"{s.candidate} {_against(s, winner)}" for s in undecided[:5])
    if len(undecided) > 5:
        shown += f" and {len(undecided) - 5} more"
    reason = (
        f"{len(names)} candidates are indistinguishable after {starts} start(s) each: "
        f"{winner.candidate} leads, {label} against it: {shown}; not one of them is "
        f"significantly worse nor within ±{settings.tie_pct:g} % of it; {how} would "
        "separate them"
    )
    return Recommendation(None, reason, winner.candidate,
                          undecided[0].candidate, names, more)


# ``tune --profile`` profiles at most this many finalists (each costs fresh starts).
MOST_FINALISTS = 3


def finalists(
    state: RaceState,
    recommendation: Recommendation,
    runs: Sequence[RunRecord],
    objective: Objective,
    *,
    most: int = MOST_FINALISTS,
) -> tuple[str, ...]:
    """The candidates ``tune --profile`` profiles once the race is over, the one to
    explain first: the recommended candidate (or, with none, the leader), then the
    leader if it is not the recommended one, then the other candidates still in, best
    first; ``most`` in all. When the race left only one in, its runner-up is the best of
    the candidates dropped last (``runs``: the race's, to rank them), so that the
    recommendation still has something to be explained against. Empty when nothing was
    measured."""
    first = recommendation.candidate or recommendation.winner or (
        state.leader.candidate if state.leader is not None else None
    )
    if first is None:
        return ()
    chosen = [first]
    for name in (recommendation.winner, *state.contenders):
        if name is not None and name not in chosen and len(chosen) < most:
            chosen.append(name)
    if len(chosen) == 1 and state.dropped:
        last = max(d.after_round for d in state.dropped)
        by: dict[str, list[RunRecord]] = {}
        for run in runs:
            by.setdefault(run.variant, []).append(run)
        closest = best_first(
            [d.candidate for d in state.dropped if d.after_round == last], by, objective
        )
        chosen += closest[: max(most - 1, 0)][:1]
    return tuple(chosen)
