"""Error rates over a family of comparisons: Holm's step-down adjustment, and naming a
winner only when it beats the runner-up. Pure functions.

A study asks several questions at once (quick: 2 variants x 4 endpoints = 8
comparisons with the baseline). Each at 5 % would call at least one difference
between identical stacks in up to a third of studies; Holm's adjustment keeps
that family-wise rate at 5 % without assuming the comparisons independent (they
share the baseline), and is never less powerful than Bonferroni.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from servelab.analysis.stats import DIFFERENT, NOT_JUDGED, Comparison, p_text, verdict


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (step-down, monotone, capped at 1), in the given order:
    a comparison is significant at family-wise level alpha when its adjusted
    p-value is below alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def judge_family(
    comparisons: Sequence[Comparison],
    *,
    higher_is_better: bool,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
) -> list[Comparison]:
    """``comparisons`` (one metric, one experiment) with Holm-adjusted p-values and the
    verdicts they give: "better"/"worse" only when the adjusted p-value is below
    ``alpha``. Comparisons without a test (inconclusive, no difference, not judged)
    are left as they are and do not count in the family."""
    tested = [
        i for i, c in enumerate(comparisons)
        if c.p_value is not None and c.verdict != NOT_JUDGED and c.verdict != "inconclusive"
    ]
    adjusted = holm([comparisons[i].p_value or 0.0 for i in tested])
    judged = list(comparisons)
    for i, p_adjusted in zip(tested, adjusted, strict=True):
        c = comparisons[i]
        assert c.p_value is not None
        said, why = verdict(
            p_adjusted, c.difference_pct, c.difference, higher_is_better=higher_is_better,
            alpha=alpha, min_effect_pct=min_effect_pct,
        )
        if len(tested) > 1:
            why = (
                f"p {p_text(c.p_value, 3)}, Holm-adjusted over {len(tested)} comparisons "
                f"p {p_text(p_adjusted, 3)} {'<' if p_adjusted < alpha else '>='} {alpha}"
            )
            if said not in DIFFERENT and p_adjusted < alpha:  # below the minimum effect
                why += f", but |{c.difference_pct:.2f} %| is below the minimum effect"
        judged[i] = replace(
            c,
            verdict=said,
            reason=_with_design(c.reason, why),
            p_adjusted=p_adjusted,
            family=len(tested),
        )
    return judged


def _with_design(reason: str, why: str) -> str:
    """Keep the design part of a reason ("3 + 3 starts, 6 passes, 4 df") before the
    p-value part that the family's judgement replaces."""
    design, sep, _ = reason.rpartition(", p = ")
    return f"{design}, {why}" if sep and design else why
