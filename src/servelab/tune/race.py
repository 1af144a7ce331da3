"""The race of ``servelab tune``: which candidates are still in, after each round. Pure.

An F-race (Birattari et al., 2002) with servelab's own comparisons: every round
starts each candidate still in afresh and measures it (interleaved with the
others, so the machine's drift falls on all alike). After a round, the leader
is the candidate with the best mean that keeps the limits; every other one is
compared with it by the test the reports use (``compare_variants``: nested over
starts for sliced runs, paired by round or Welch's otherwise), and dropped when
it is significantly worse. A candidate that broke a limit in every start is
dropped too. Nothing is dropped before ``min_starts`` starts, since a
single start says nothing about how much starts differ.

The state after any number of rounds is a function of the runs alone, so a
resumed or interrupted tune replays the same decisions from its stored runs. What the
race recommends from it: ``tune/recommendation.py``.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from servelab.analysis.comparisons import compare_rounds, compare_variants
from servelab.analysis.family import judge_family
from servelab.analysis.stats import Comparison, confidence_interval, p_text
from servelab.errors import SpecError
from servelab.results.records import RunRecord
from servelab.tune.objective import MEMORY, MIB, Objective, pooled_error_share


@dataclass(frozen=True)
class RaceSettings:
    # The chance the race drops a candidate that is not worse than the leader, over the
    # whole race: each round's drops are Holm-adjusted over the candidates compared with
    # the leader in it, at alpha / max_rounds (a Bonferroni share per round), so that
    # looking after every round keeps it.
    alpha: float = 0.05
    min_starts: int = 2  # starts before anything is dropped
    max_rounds: int = 10
    # The race is over once every contender's interval against the leader is within
    # this many percent: more rounds would not separate them by more than that.
    tie_pct: float = 5.0
    # Successive halving (Karnin et al., 2013) first: after each of the first
    # ``halving_rounds`` rounds, while at least ``halving_from`` candidates are in, only
    # the best 1/``halving_eta`` go on (Hyperband's default eta of 3), so that a large
    # space costs little more than one round of starts before the tests take over.
    halving_rounds: int = 1
    halving_from: int = 8
    halving_eta: int = 3


@dataclass(frozen=True)
class Dropped:
    candidate: str
    after_round: int
    reason: str


@dataclass(frozen=True)
class Standing:
    """A candidate still in: its figures over its starts, and against the leader."""

    candidate: str
    starts: int
    mean: float  # of the objective's metric, per start
    interval: tuple[float, float] | None  # 95 % interval of that mean (from 3 starts)
    versus_leader: Comparison | None  # None for the leader itself
    memory_mib: float
    p99_ms: float
    error_ratio: float
    meets_limits: bool


@dataclass(frozen=True)
class RaceState:
    rounds: int  # rounds judged (complete)
    alive: tuple[str, ...]  # every candidate not dropped, measured or not
    standings: tuple[Standing, ...]  # still in, best first (limits kept first)
    dropped: tuple[Dropped, ...]  # in the order they were dropped
    over: str | None  # why the race is over; None: another round would help

    @property
    def contenders(self) -> tuple[str, ...]:
        return tuple(s.candidate for s in self.standings)

    @property
    def leader(self) -> Standing | None:
        return self.standings[0] if self.standings else None


def compare_with_leader(
    runs: Sequence[RunRecord], leader: str, candidate: str, objective: Objective, alpha: float
) -> Comparison:
    """``candidate`` against ``leader`` on the objective's metric. Memory is kept per
    start, not per slice: compared by starts (paired by round from three)."""
    metric = objective.metric
    if metric is MEMORY:
        def own(name: str) -> list[RunRecord]:
            return sorted((r for r in runs if r.variant == name), key=lambda r: r.repetition)

        return compare_rounds(own(leader), own(candidate), metric, alpha=alpha)
    return compare_variants(runs, leader, candidate, metric, alpha=alpha)


def _standing(
    name: str, runs: Sequence[RunRecord], objective: Objective, versus: Comparison | None
) -> Standing:
    values = [objective.metric.value(r) for r in runs]
    return Standing(
        candidate=name,
        starts=len(runs),
        mean=statistics.fmean(values),
        # From three starts: two give a t interval 12.7 standard errors wide.
        interval=confidence_interval(values) if len(values) >= 3 else None,
        versus_leader=versus,
        memory_mib=statistics.fmean(r.stack_peak_rss_bytes for r in runs) / MIB,
        p99_ms=statistics.fmean(r.load.latency_p99_ms for r in runs),
        error_ratio=pooled_error_share(runs),
        meets_limits=objective.meets_on_average(runs),
    )


def best_first(
    candidates: Sequence[str], by: dict[str, list[RunRecord]], objective: Objective
) -> list[str]:
    """Measured candidates, best first: those keeping the limits before the others."""
    metric = objective.metric

    def key(name: str) -> tuple[bool, float]:
        mean = statistics.fmean(metric.value(r) for r in by[name])
        score = -mean if metric.higher_is_better else mean
        return (not objective.meets_on_average(by[name]), score)

    return sorted((c for c in candidates if by.get(c)), key=key)


def _mean(runs: Sequence[RunRecord], objective: Objective) -> float:
    return statistics.fmean(objective.metric.value(r) for r in runs)


def judge_round(
    runs: Sequence[RunRecord],
    alive: Sequence[str],
    objective: Objective,
    settings: RaceSettings,
    after_round: int,
) -> list[Dropped]:
    """The candidates of ``alive`` to drop after ``after_round``, from ``runs`` (those of
    rounds up to it)."""
    by: dict[str, list[RunRecord]] = {}
    for run in sorted(runs, key=lambda r: r.repetition):
        by.setdefault(run.variant, []).append(run)
    dropped = []
    for name in alive:
        why = objective.breaks_always(by.get(name, []), settings.min_starts)
        if why:
            dropped.append(Dropped(name, after_round, why))
    out = {d.candidate for d in dropped}
    ranked = best_first([c for c in alive if c not in out], by, objective)
    if not ranked:
        return dropped
    leader = ranked[0]
    if after_round <= settings.halving_rounds and len(ranked) >= settings.halving_from:
        keep = math.ceil(len(ranked) / settings.halving_eta)
        best = _mean(by[leader], objective)
        for place, name in enumerate(ranked[keep:], start=keep + 1):
            gap = 100 * (_mean(by[name], objective) / best - 1) if best else 0.0
            dropped.append(Dropped(
                name, after_round,
                f"successive halving: ranked {place} of {len(ranked)} after round "
                f"{after_round} ({objective.metric.label.lower()} {gap:+.1f} % against "
                f"{leader}); the better {keep} went on",
            ))
        return dropped
    if len(by[leader]) < settings.min_starts:
        return dropped
    contenders = [name for name in ranked[1:] if len(by[name]) >= settings.min_starts]
    per_round = settings.alpha / settings.max_rounds
    compared = judge_family(
        [compare_with_leader(runs, leader, name, objective, per_round) for name in contenders],
        higher_is_better=objective.metric.higher_is_better,
        alpha=per_round,
    )
    for name, versus in zip(contenders, compared, strict=True):
        if versus.verdict == "worse":
            dropped.append(Dropped(name, after_round, _worse_reason(objective, leader, versus)))
    return dropped


def _worse_reason(objective: Objective, leader: str, versus: Comparison) -> str:
    metric = objective.metric
    text = f"{metric.label.lower()} {versus.difference_pct:+.1f} % against {leader}"
    bounds = versus.interval_pct
    if bounds is not None:
        text += f" (95 % CI {bounds[0]:+.1f} … {bounds[1]:+.1f} %"
        if versus.p_adjusted is not None:
            text += f", Holm-adjusted p {p_text(versus.p_adjusted)} over {versus.family})"
        else:
            text += f", p {p_text(versus.p_value)})" if versus.p_value is not None else ")"
    return text


def race_state(
    runs: Sequence[RunRecord],
    candidates: Sequence[str],
    objective: Objective,
    settings: RaceSettings = RaceSettings(),
) -> RaceState:
    """Replay the race over ``runs`` (one workload's), round by round."""
    alive = list(candidates)
    dropped: list[Dropped] = []
    rounds = 0
    for number in range(1, max((r.repetition for r in runs), default=0) + 1):
        measured = {r.variant for r in runs if r.repetition == number}
        if not set(alive) <= measured:
            break  # an unfinished round (interrupted): judged once it is complete
        upto = [r for r in runs if r.repetition <= number]
        out = judge_round(upto, alive, objective, settings, number)
        dropped.extend(out)
        gone = {d.candidate for d in out}
        alive = [c for c in alive if c not in gone]
        rounds = number
    by: dict[str, list[RunRecord]] = {}
    for run in sorted(runs, key=lambda r: r.repetition):
        if run.variant in alive:
            by.setdefault(run.variant, []).append(run)
    ranked = best_first(alive, by, objective)
    standings = []
    for index, name in enumerate(ranked):
        versus = None
        if index and len(by[name]) >= 2 and len(by[ranked[0]]) >= 2:
            versus = compare_with_leader(runs, ranked[0], name, objective, settings.alpha)
        standings.append(_standing(name, by[name], objective, versus))
    # Candidates still in but never measured (a tune stopped in its first round).
    unmeasured = [c for c in alive if c not in by]
    state = RaceState(rounds, tuple(alive), tuple(standings), tuple(dropped), None)
    return RaceState(
        rounds, state.alive, state.standings, state.dropped,
        _why_over(state, unmeasured, settings),
    )


def _why_over(state: RaceState, unmeasured: Sequence[str], settings: RaceSettings) -> str | None:
    if state.rounds == 0:
        return None
    if unmeasured:
        return None
    if len(state.standings) == 1:
        return "one candidate left"
    if not state.standings:
        return "no candidate left"
    if state.rounds >= settings.max_rounds:
        return f"{state.rounds} rounds, the most allowed"
    tied = all(
        s.versus_leader is not None and within_tie(s.versus_leader, settings.tie_pct)
        for s in state.standings[1:]
    )
    if tied:
        return (
            f"the {len(state.standings)} candidates left are within ±{settings.tie_pct:g} % of "
            "the leader (95 % intervals): more rounds would not separate them by more"
        )
    return None


def within_tie(versus: Comparison, tie_pct: float) -> bool:
    """Whether the 95 % interval against the leader lies within ±``tie_pct``: a tie."""
    bounds = versus.interval_pct
    return bounds is not None and -tie_pct <= bounds[0] and bounds[1] <= tie_pct


# Measured on servelab's 2-CPU VM: a candidate's start costs its launch and readiness
# (about 2 s for nginx + an app server), then its warm-up and its slices, each slice
# with the driver's start and the sampling around it (about 0.2-0.5 s).
LAUNCH_S = 2.0
SLICE_OVERHEAD = 1.3
# The first round may take at most this share of the budget: the race needs later rounds
# to separate the leaders, or it ends with a list of ties.
FIRST_ROUND_SHARE = 0.5


@dataclass(frozen=True)
class FirstScreen:
    """Which candidates the first round measures within the budget, and why."""

    candidates: tuple[str, ...]
    seconds_per_start: float  # foreseen, before anything is measured
    note: str | None = None  # said when the space was narrowed to fit


def foreseen_seconds_per_start(warmup_s: float, duration_s: float) -> float:
    """One start of one candidate, foreseen before anything is measured."""
    return LAUNCH_S + SLICE_OVERHEAD * (warmup_s + duration_s)


def first_screen(
    names: Sequence[str], per_start_s: float, budget_s: float | None, seed: int = 0
) -> FirstScreen:
    """The first round of a race that fits ``budget_s``: every candidate when one start of
    each fits ``FIRST_ROUND_SHARE`` of it; else the first candidate (the space's nominal
    baseline) and an even random draw of the others, in the space's order, said. Raises
    SpecError when not even two fit: no race could decide anything."""
    if budget_s is None or len(names) * per_start_s <= FIRST_ROUND_SHARE * budget_s:
        return FirstScreen(tuple(names), per_start_s)
    fits = int(FIRST_ROUND_SHARE * budget_s // per_start_s)
    everyone = math.ceil(len(names) * per_start_s / FIRST_ROUND_SHARE)
    if fits < 2:
        raise SpecError(
            f"a budget of {budget_s:g} s cannot race any candidates: one start of each takes "
            f"about {per_start_s:.0f} s here (launch, warm-up, measuring), and the first round "
            f"may take half the budget, so not even two fit",
            f"give --budget {math.ceil(2 * per_start_s / FIRST_ROUND_SHARE)}s or more; "
            f"--budget {math.ceil(everyone / 60)}m races all {len(names)}",
        )
    rng = random.Random(seed)
    drawn = set(rng.sample(range(1, len(names)), fits - 1))
    kept = tuple(n for i, n in enumerate(names) if i == 0 or i in drawn)
    return FirstScreen(
        kept, per_start_s,
        note=f"the budget of {budget_s:g} s fits a first round of about {fits} of the "
        f"{len(names)} candidates (~{per_start_s:.0f} s a start here): racing {len(kept)}, "
        f"drawn at random (seed {seed}) with the space's first; --budget "
        f"{math.ceil(everyone / 60)}m races all {len(names)}",
    )
