"""Which variant to export: one named by the user, or the measured best.

"Best" is the variant with the highest throughput among those that failed no
request and were significantly faster than the baseline (the reports' verdict
"better" on the answer's metric: requests/s, or requests per CPU second for
stacks measured side by side; the one verdict every output shows). With
several workloads, a variant must be "better" on at least one and "worse" on
none, and throughput is compared as the mean gain over the baseline across
workloads (requests/s of different endpoints do not add up). When no variant
qualifies there is no clear winner, and the error says why for each one
instead of picking a number out of noise.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from servelab.analysis.analyze import VariantAnalysis
from servelab.analysis.metrics import answer_metric
from servelab.analysis.stats import p_text
from servelab.config.stack import StackSpec
from servelab.errors import ServelabError
from servelab.report.base import ReportInput, failure_breakdown

BEST = "best"


class NoClearWinnerError(ServelabError):
    """No variant is both error-free and significantly faster than the baseline."""

    exit_code = 2


@dataclass(frozen=True)
class Candidate:
    """A variant judged for "best": eligible or not, and why, with its mean gain."""

    variant: str
    eligible: bool
    reason: str
    gain_pct: float | None  # mean difference to the baseline over workloads (answer's metric)


@dataclass(frozen=True)
class Choice:
    stack: StackSpec
    how: str  # "best", "named" or "tune" (what a tune result recommends)
    reason: str
    candidates: tuple[Candidate, ...]  # every non-baseline variant, best first

    @property
    def name(self) -> str:
        return self.stack.name


def _verdict_text(found: VariantAnalysis, key: str) -> str:
    comparison = found.comparisons[key]
    text = f"{found.workload}: {comparison.verdict}"
    if comparison.difference_pct is not None:
        text += f", {comparison.difference_pct:+.1f} %"
    if comparison.p_value is not None:
        text += f" (p {p_text(comparison.p_value)})"
    return text


def judge(report: ReportInput, variant: str) -> Candidate:
    """Whether ``variant`` can be "best", and why (not)."""
    analyses = [v for v in report.analysis.variants if v.variant == variant]
    if not analyses:
        return Candidate(variant, False, "no finished runs", None)
    requests = sum(r.load.requests_total for v in analyses for r in v.runs)
    errors = sum(v.total_errors for v in analyses)
    key = answer_metric(report.experiment).key
    compared = [v for v in analyses if key in v.comparisons]
    gains = [
        pct for v in compared if (pct := v.comparisons[key].difference_pct) is not None
    ]
    gain = statistics.fmean(gains) if gains else None
    if errors:
        causes = failure_breakdown([r for v in analyses for r in v.runs])
        detail = ", ".join(f"{k}: {n}" for k, n in causes.items())
        return Candidate(
            variant, False, f"{errors} of {requests} requests failed ({detail})", gain
        )
    if not compared:
        return Candidate(variant, False, "no baseline runs to compare with", gain)
    worse = [v for v in compared if v.comparisons[key].verdict == "worse"]
    if worse:
        return Candidate(
            variant,
            False,
            "significantly slower than the baseline on "
            + "; ".join(_verdict_text(v, key) for v in worse),
            gain,
        )
    better = [v for v in compared if v.comparisons[key].verdict == "better"]
    if not better:
        return Candidate(
            variant,
            False,
            "not significantly faster than the baseline on any workload ("
            + "; ".join(_verdict_text(v, key) for v in compared)
            + ")",
            gain,
        )
    return Candidate(
        variant,
        True,
        "no failed request; significantly faster than the baseline on "
        + "; ".join(_verdict_text(v, key) for v in better),
        gain,
    )


def rank(report: ReportInput) -> list[Candidate]:
    """Every variant but the baseline: eligible ones first, by mean gain, then the rest."""
    judged = [judge(report, s.name) for s in report.experiment.variants]
    return sorted(
        judged,
        key=lambda c: (not c.eligible, -(c.gain_pct if c.gain_pct is not None else -1e18)),
    )


def choose_variant(
    report: ReportInput,
    wanted: str,
    *,
    source: str = "the result",
    recommended: tuple[str, str] | None = None,
) -> Choice:
    """The stack to export: ``wanted`` by name, or ``"best"`` (for a tune result, the
    candidate it recommends: ``recommended`` is its name and why)."""
    experiment = report.experiment
    names = [s.name for s in experiment.stacks]
    candidates = tuple(rank(report))
    if wanted == BEST and recommended is not None:
        name, why = recommended
        stack = next((s for s in experiment.stacks if s.name == name), None)
        if stack is not None:
            return Choice(stack, "tune", f"recommended by servelab tune: {why}", candidates)
    if wanted != BEST:
        stack = next((s for s in experiment.stacks if s.name == wanted), None)
        if stack is None:
            raise ServelabError(
                f"no variant {wanted!r} in {source}",
                f"pass --variant best or one of: {', '.join(names)}",
            )
        if not any(v.variant == wanted for v in report.analysis.variants):
            raise ServelabError(
                f"variant {wanted!r} has no finished run in {source}, so nothing to justify it",
                "resume the experiment (servelab run --resume) or choose another variant",
            )
        return Choice(stack, "named", f"chosen by name (--variant {wanted})", candidates)
    eligible = [c for c in candidates if c.eligible]
    if not eligible:
        why = "\n".join(f"- {c.variant}: {c.reason}" for c in candidates) or (
            "- the experiment has no variant besides the baseline"
        )
        raise NoClearWinnerError(
            f"no clear winner in {source}: no variant is both free of errors and "
            f"significantly faster than the baseline {experiment.baseline.name!r}",
            "export one by name with --variant NAME "
            f"({', '.join(names)}), or repeat the experiment with more runs (-r) "
            "so that real differences become significant",
            detail=f"Why each variant does not qualify:\n{why}",
        )
    best = eligible[0]
    stack = next(s for s in experiment.stacks if s.name == best.variant)
    reason = f"the best variant: {best.reason}"
    if best.gain_pct is not None:
        reason += f"; mean gain over the baseline {best.gain_pct:+.1f} % requests/s"
    if len(eligible) > 1:
        runner_up = eligible[1]
        reason += (
            f" (next best: {runner_up.variant}, {runner_up.gain_pct:+.1f} %)"
            if runner_up.gain_pct is not None
            else f" (next best: {runner_up.variant})"
        )
    return Choice(stack, BEST, reason, candidates)
