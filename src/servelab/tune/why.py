"""``servelab tune --profile``: where the finalists' CPU per request went. Pure.

The race measures without py-spy: profiling makes every start take longer, and the
race's rounds must stay comparable. Once the race is over (a winner, a tie, the rounds
or the budget spent; not after Ctrl-C), its finalists (``recommendation.finalists``) get
``PROFILED_STARTS`` fresh starts each, interleaved as the race's rounds are, every
measured window followed by a py-spy window of its own as ``study --profile`` does.
Those starts are stored after the race's (the repetitions from the first one with a
profile on) and kept out of the race: the ranking stays the race's. The recommended
candidate is then explained against each other finalist with
``analysis.explain.explain`` (by part of the stack and by function, 95 % intervals over
the profiled starts, paired by start), and drawn against the runner-up as a
differential flame graph (``tune-flame.svg`` beside tune.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from servelab.analysis.explain import Change, Explanation, explain, why_lines
from servelab.analysis.profile import mean_stacks, run_profiles
from servelab.report.flames import flame_svg
from servelab.results.records import RunRecord

# Fresh starts of each finalist with py-spy: three give a t interval (two: 12.7 standard
# errors wide), and cost each finalist about three starts of twice the measuring.
PROFILED_STARTS = 3
TUNE_FLAME = "tune-flame.svg"


def split_runs(runs: Sequence[RunRecord]) -> tuple[list[RunRecord], list[RunRecord]]:
    """(the race's runs, the finalists' profiled starts): the profiled starts are every
    run from the first repetition in which a run was profiled on."""
    first = min((r.repetition for r in runs if r.profile is not None), default=None)
    if first is None:
        return list(runs), []
    return [r for r in runs if r.repetition < first], [r for r in runs if r.repetition >= first]


@dataclass(frozen=True)
class TuneWhy:
    """What tune.md's Why part says: the first finalist against each other one."""

    first: str  # the recommended candidate (or, with none, the leader)
    recommended: bool  # ``first`` is the recommended candidate
    finalists: tuple[str, ...]
    starts: tuple[tuple[str, int], ...]  # profiled starts of each finalist
    explanations: tuple[Explanation, ...]  # ``first`` against each other finalist
    flame_svg: str | None = None  # ``first`` against the runner-up (differential)
    note: str | None = None  # why nothing is explained (not profiled, ...)


def not_profiled(note: str) -> TuneWhy:
    """A Why part that says only why there is none."""
    return TuneWhy("", False, (), (), (), None, note)


def tune_why(
    profiled: Sequence[RunRecord],
    folded: Mapping[tuple[str, str, int], str],
    finalists: Sequence[str],
    *,
    recommended: bool,
) -> TuneWhy:
    """``finalists[0]`` against each other finalist, from the profiled starts' runs and
    their folded stacks (``results.profiles.read_profiles``)."""
    profiles = run_profiles(profiled, folded)
    mine = {name: [p for p in profiles if p.variant == name] for name in finalists}
    starts = tuple((name, len(mine[name])) for name in finalists)
    if not finalists or not mine[finalists[0]]:
        return TuneWhy(finalists[0] if finalists else "", recommended, tuple(finalists), starts,
                       (), None, "no profiled start of the finalists is on disk")
    first = finalists[0]
    explanations = tuple(
        e for other in finalists[1:]
        if (e := explain(mine[other], mine[first])) is not None
    )
    flame = None
    if explanations:
        runner_up = explanations[0].baseline
        flame = flame_svg(mean_stacks(mine[first]), mean_stacks(mine[runner_up]),
                          title=f"{first} vs {runner_up}")
    note = None if explanations else "the finalists are not all profiled"
    return TuneWhy(first, recommended, tuple(finalists), starts, explanations, flame, note)


def why_markdown(why: TuneWhy) -> list[str]:
    """tune.md's (and the terminal's) Why part."""
    lines = ["", "## Why", ""]
    if why.note is not None and not why.explanations:
        return [*lines, f"Not explained: {why.note}."]
    role = "the recommended" if why.recommended else "the leader"
    starts = ", ".join(f"{name} {count}" for name, count in why.starts)
    lines += [
        f"Where the CPU per request went (`--profile`), {role} {why.first} against the "
        f"other finalists: each got fresh starts once the race was over ({starts}), py-spy "
        "sampling each in a window of its own right after its measured one (the race itself "
        "was measured without it; these starts are not part of the ranking). By part of the "
        "stack, then the functions whose self time changed most; 95 % intervals over the "
        "profiled starts, paired by start.",
        "",
        "```text",
    ]
    for explanation in why.explanations:
        lines += why_lines(explanation)
    lines.append("```")
    if why.flame_svg is not None:
        lines += ["", f"Differential flame graph: {TUNE_FLAME} ({why.first} against "
                  f"{why.explanations[0].baseline}: red where its CPU per request is higher, "
                  "blue where lower)."]
    return lines


def _change(change: Change) -> dict[str, Any]:
    comparison = change.comparison
    return {
        "name": change.name,
        "difference_us": change.difference,
        "interval_us": comparison.interval,
        "mean_us": comparison.variant_mean,
        "against_us": comparison.baseline_mean,
    }


def why_document(why: TuneWhy) -> dict[str, Any]:
    """tune.json's "why": the same, for programs (CPU µs per request)."""
    return {
        "explained": why.first or None,
        "recommended": why.recommended,
        "finalists": list(why.finalists),
        "profiled_starts": dict(why.starts),
        "against": [
            {
                "candidate": e.baseline,
                "total": _change(e.total),
                "parts": [_change(c) for c in e.parts],
                "functions": [_change(c) for c in e.functions],
                "unexplained_us": e.unexplained,
                "lines": why_lines(e),
            }
            for e in why.explanations
        ],
        "flame_graph": TUNE_FLAME if why.flame_svg is not None else None,
        "note": why.note,
    }
