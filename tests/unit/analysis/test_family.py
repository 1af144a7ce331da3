"""Holm's adjustment and the family's verdicts, by hand."""

from __future__ import annotations

import pytest

from servelab.analysis.family import holm, judge_family
from servelab.analysis.stats import Comparison


def test_holm_by_hand():
    # Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 -> 0.06 (monotone).
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([0.02]) == [0.02]
    assert holm([]) == []


def comparison(p: float | None, verdict: str, pct: float = 3.0) -> Comparison:
    return Comparison(100.0, 100 + pct, pct, pct, (pct - 1, pct + 1), p, verdict, "2 + 2 "
                      f"starts, 4 passes, 6 df, p = {p} < 0.05", df=6)


def test_a_family_keeps_only_what_survives_the_adjustment():
    found = judge_family(
        [comparison(0.004, "better"), comparison(0.03, "better"), comparison(None, "not judged"),
         comparison(0.2, "no significant difference", -1.0)],
        higher_is_better=True,
    )
    assert [c.verdict for c in found] == [
        "better", "no significant difference", "not judged", "no significant difference"
    ]
    assert found[0].p_adjusted == pytest.approx(0.012) and found[0].family == 3
    assert found[1].p_adjusted == pytest.approx(0.06)
    assert found[2].p_adjusted is None and found[2].family is None  # not in the family
    assert found[1].reason.startswith("2 + 2 starts, 4 passes, 6 df, p = 0.03, Holm-adjusted")


def test_a_single_comparison_is_its_own_family():
    (found,) = judge_family([comparison(0.03, "better")], higher_is_better=True)
    assert found.verdict == "better" and found.p_adjusted == pytest.approx(0.03)
