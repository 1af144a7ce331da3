"""tune's ``max-capacity`` objective: "how many workers hold the most traffic at p99 <
100 ms?".

A capacity search per candidate would cost minutes each (servelab.capacity: 8-16 trials
of 5 s); the race is the cheap first screen. It runs as for ``max-rps`` (closed model,
the most requests/s: what saturates later tends to hold more traffic under an SLO too),
then its finalists (the recommendation and up to two runners-up) are searched for their
capacity at the SLO in turns, and compared with the race's choice as a ratio with an
interval (Holm over the finalists). The finalist that holds significantly more than the
race's choice is recommended (the most, if several do); otherwise the race's choice
stands, its capacity said. ``choose`` is pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rich.console import Console

from servelab.capacity.compare import CapacityComparison
from servelab.capacity.plan import VariantCapacity
from servelab.config.experiment import Experiment
from servelab.config.run import RunOptions, UserApp

CAPACITY_HEADING = "## Capacity under the SLO"


@dataclass(frozen=True)
class CapacityChoice:
    answers: tuple[VariantCapacity, ...]  # the race's choice first
    comparisons: tuple[CapacityComparison, ...]  # each other finalist against it
    candidate: str | None
    reason: str
    slo: str = ""  # as given
    confidence: float = 0.90  # of the intervals


def choose(
    answers: Sequence[VariantCapacity], comparisons: Sequence[CapacityComparison]
) -> CapacityChoice:
    """The finalist to recommend (``answers[0]``: the race's choice)."""
    if not answers:
        return CapacityChoice((), (), None, "no finalist to search")
    first = answers[0]
    by_name = {a.variant: a for a in answers}
    more = [c for c in comparisons if c.verdict == "more"]
    if more:
        best = max(more, key=lambda c: by_name[c.variant].estimate.rate or 0.0)
        return CapacityChoice(
            tuple(answers), tuple(comparisons), best.variant,
            f"holds significantly more traffic than the race's choice {first.variant} "
            f"(×{best.ratio:.2f})" if best.ratio is not None else "holds significantly more",
        )
    if first.estimate.rate is None:
        return CapacityChoice(tuple(answers), tuple(comparisons), None,
                              f"the race's choice {first.variant} has no capacity answer "
                              "and no finalist holds significantly more")
    tied = [c.variant for c in comparisons if c.verdict == "no difference shown"]
    return CapacityChoice(
        tuple(answers), tuple(comparisons), first.variant,
        "the race's choice; no finalist holds significantly more traffic"
        + (f" ({', '.join(tied)} not told apart from it)" if tied else ""),
    )


def choice_markdown(choice: CapacityChoice) -> str:
    """The section tune.md ends with."""
    from servelab.capacity.answer import cpu_line, rate, variant_line
    from servelab.capacity.slo import parse_slo

    parsed, confidence = parse_slo(choice.slo), choice.confidence
    lines = [
        CAPACITY_HEADING, "",
        f"The race's finalists, each searched for the largest arrival rate that keeps "
        f"{parsed} ({100 * confidence:g} % intervals; open model, each request's latency "
        "from its intended send time):", "",
    ]
    for a in choice.answers:
        lines.append(f"- {variant_line(a, parsed, confidence)}")
        ran_out = cpu_line(a, parsed)
        if ran_out is not None:  # whether more workers could raise it
            lines.append(f"  - {ran_out}")
    if choice.comparisons:
        lines += ["", f"Against the race's choice {choice.answers[0].variant} (Holm over the "
                  "finalists):", ""]
        lines += [f"- {c.describe(choice.answers[0].variant)}" for c in choice.comparisons]
    held = next((a for a in choice.answers if a.variant == choice.candidate), None)
    lines += ["", (
        f"**Recommended for the most traffic at {parsed}: {choice.candidate}** "
        f"({rate(held.estimate.rate) if held else '-'} req/s): {choice.reason}."
        if choice.candidate else f"**No recommendation by capacity**: {choice.reason}."
    ), ""]
    return "\n".join(lines)


def search_finalists(
    experiment: Experiment,  # the race's candidates
    names: Sequence[str],
    slo: str,
    options: RunOptions,
    user_app: UserApp,
    *,
    console: Console,
    out: Console,
    tune_dir: Path,
) -> CapacityChoice:
    """The finalists' capacities at ``slo`` (the race's choice first), the choice, and
    tune.md and tune.json with it; the searches' own files in a capacity directory beside
    the result (as `servelab capacity` writes them)."""
    from servelab import api
    from servelab.capacity import CapacityPlan, capacity_of
    from servelab.capacity.compare import compare_capacities
    from servelab.capacity.slo import parse_slo
    from servelab.tune.report import TUNE_JSON, TUNE_MARKDOWN

    stacks = {s.name: s for s in experiment.stacks}
    finalists = experiment.with_stacks([stacks[name] for name in names])
    plan = CapacityPlan(slo=parse_slo(slo))
    answers = api.capacity(capacity_of(finalists, "the tune's finalists"), plan, options,
                           user_app, console=console, out=out)
    comparisons = compare_capacities(answers, plan.confidence) if len(answers) > 1 else []
    choice = replace(choose(answers, comparisons), slo=slo, confidence=plan.confidence)
    markdown = tune_dir / TUNE_MARKDOWN
    markdown.write_text(markdown.read_text().rstrip("\n") + "\n\n" + choice_markdown(choice))
    document = json.loads((tune_dir / TUNE_JSON).read_text())
    document["capacity"] = {
        "slo": slo, "confidence": plan.confidence, "recommended": choice.candidate,
        "reason": choice.reason, "finalists": [a.to_dict() for a in answers],
        "comparisons": [asdict(c) for c in comparisons],
    }
    (tune_dir / TUNE_JSON).write_text(json.dumps(document, indent=2))
    return choice
