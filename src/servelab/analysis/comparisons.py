"""A variant against the baseline, by the test its design allows: nested over stack
starts for runs in slices, paired by round or Welch's otherwise; and two stored results
against each other. Every verdict of every report comes from here. Pure."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace

from servelab.analysis.family import judge_family
from servelab.analysis.metrics import METRICS, Metric
from servelab.analysis.nested import DesignEffect, compare_design, transform
from servelab.analysis.stats import (
    NOT_JUDGED,
    Comparison,
    compare,
    compare_paired,
    percent_change,
    verdict,
)
from servelab.analysis.validity import not_judged_because
from servelab.config.experiment import Experiment
from servelab.results.records import RunRecord

# Rounds from which variants are compared with the baseline round by round (paired).
MIN_PAIRED_ROUNDS = 3


def verdict_line(metric: Metric, comparison: Comparison) -> str:
    """'Requests per second: better, +22.21 % (95 % CI +15.0 … +29.4 %), p = 0.003'."""
    parts = [f"{metric.label}: {comparison.verdict}"]
    if comparison.difference_pct is not None:
        parts.append(f", {comparison.difference_pct:+.2f} %")
    else:
        parts.append(f", {comparison.difference:+.3g} {metric.unit}")
    if comparison.interval is not None:
        low, high = comparison.interval
        if comparison.baseline_mean:
            scale = 100.0 / comparison.baseline_mean
            parts.append(f" (95 % CI {low * scale:+.1f} … {high * scale:+.1f} %)")
        else:
            parts.append(f" (95 % CI {low:+.3g} … {high:+.3g} {metric.unit})")
    parts.append(f"; {comparison.reason}")
    return "".join(parts)


def compare_rounds(
    baseline: Sequence[RunRecord],
    variant: Sequence[RunRecord],
    metric: Metric,
    *,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
) -> Comparison:
    """A variant against the baseline of the same experiment: paired by round when both
    were measured in the same rounds, at least 3 (servelab's interleaved plan; a
    drift of the machine between rounds then cancels out), else Welch's test on the
    two samples (with 2 rounds a paired test has 1 degree of freedom, Welch's ~2)."""
    return compare_round_values(
        {r.repetition: metric.value(r) for r in baseline},
        {r.repetition: metric.value(r) for r in variant},
        higher_is_better=metric.higher_is_better, alpha=alpha, min_effect_pct=min_effect_pct,
    )


def compare_round_values(
    by_round: Mapping[int, float],
    mine: Mapping[int, float],
    *,
    higher_is_better: bool,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
) -> Comparison:
    """:func:`compare_rounds` on figures already taken from the runs (round -> value)."""
    higher = higher_is_better
    if by_round.keys() == mine.keys() and len(mine) >= MIN_PAIRED_ROUNDS:
        rounds = sorted(mine)
        paired = compare_paired(
            [by_round[n] for n in rounds], [mine[n] for n in rounds],
            higher_is_better=higher, alpha=alpha, min_effect_pct=min_effect_pct,
        )
        return replace(paired, reason=f"paired by round, {paired.reason}", test="paired t-test")
    return compare(
        list(by_round.values()), list(mine.values()),
        higher_is_better=higher, alpha=alpha, min_effect_pct=min_effect_pct,
    )


def compare_variants(
    runs: Sequence[RunRecord],
    baseline: str,
    variant: str,
    metric: Metric,
    *,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
) -> Comparison:
    """``variant`` against ``baseline`` among ``runs`` (one workload's, of one experiment),
    by the test the design allows: nested over starts when every run was sliced, paired
    by round or Welch's otherwise. Every report's verdicts come from here."""
    pair = [r for r in runs if r.variant in (baseline, variant)]
    if is_sliced(pair):
        return compare_starts(
            runs, baseline, variant, metric, alpha=alpha, min_effect_pct=min_effect_pct
        )
    return compare_rounds(
        sorted((r for r in pair if r.variant == baseline), key=lambda r: r.repetition),
        sorted((r for r in pair if r.variant == variant), key=lambda r: r.repetition),
        metric,
        alpha=alpha,
        min_effect_pct=min_effect_pct,
    )


def is_sliced(runs: Sequence[RunRecord]) -> bool:
    """True when every run kept its slices' figures (interleaved measurement)."""
    return bool(runs) and all(r.slice_figures for r in runs)


def slice_design(
    runs: Sequence[RunRecord], metric: Metric, log_scale: bool
) -> dict[str, dict[int, dict[int, float]]]:
    """variant -> start -> pass -> the metric of that slice (in the analysed scale)."""
    design: dict[str, dict[int, dict[int, float]]] = {}
    for run in runs:
        design.setdefault(run.variant, {})[run.repetition] = {
            s.pass_number: transform(metric.per_slice(s), log_scale) for s in run.slice_figures
        }
    return design


def pooled_design(
    runs: Sequence[RunRecord], metric: Metric, log_scale: bool
) -> dict[str, dict[int, dict[int, float]]]:
    """variant -> start -> the start's own figure (from all its requests), keyed by its
    round so that the starts of one round are compared with each other (a block)."""
    design: dict[str, dict[int, dict[int, float]]] = {}
    for run in runs:
        design.setdefault(run.variant, {})[run.repetition] = {
            run.repetition: transform(metric.value(run), log_scale)
        }
    return design


def compare_starts(
    runs: Sequence[RunRecord],
    baseline: str,
    variant: str,
    metric: Metric,
    *,
    alpha: float = 0.05,
    min_effect_pct: float = 0.0,
) -> Comparison:
    """A variant against the baseline in an interleaved design (``runs``: every run of one
    workload, all sliced): slices centred on their pass, starts as the unit that varies
    (``servelab.analysis.nested``); rates and latencies as ratios, errors as differences."""
    if metric.pooled:
        values = [metric.value(r) for r in runs]
    else:
        values = [metric.per_slice(s) for r in runs for s in r.slice_figures]
    log_scale = metric.log_scale and all(v > 0 for v in values)
    mine = [metric.value(r) for r in runs if r.variant == variant]
    theirs = [metric.value(r) for r in runs if r.variant == baseline]
    base_mean = statistics.fmean(theirs) if theirs else 0.0
    var_mean = statistics.fmean(mine) if mine else 0.0

    def result(
        pct: float | None,
        interval: tuple[float, float] | None,
        p: float | None,
        verdict: str,
        reason: str,
        effect: DesignEffect | None = None,
    ) -> Comparison:
        return Comparison(
            base_mean,
            var_mean,
            var_mean - base_mean,
            pct,
            interval,
            p,
            verdict,
            reason,
            test="nested t-test over stack starts",
            starts=effect.starts if effect else (len(theirs), len(mine)),
            passes=effect.passes if effect else None,
            df=effect.df if effect else None,
        )

    if values and len(set(values)) == 1:
        return result(
            0.0 if base_mean else None,
            (0.0, 0.0),
            None,
            "no difference",
            "identical in every slice",
        )
    design = pooled_design(runs, metric, log_scale) if metric.pooled else slice_design(
        runs, metric, log_scale
    )
    effect = compare_design(
        design,
        baseline,
        variant,
        log_scale=log_scale,
        level=1 - alpha,
    )
    if effect is None:
        return result(
            percent_change(base_mean, var_mean),
            None,
            None,
            "inconclusive",
            "needs a variant started at least twice",
        )
    pct: float | None
    if log_scale:
        pct, low, high = (100 * math.expm1(x) for x in (effect.estimate, effect.low, effect.high))
        # The interval in the metric's unit, around the baseline's mean (reports scale it
        # back to percent of that mean).
        interval = (base_mean * low / 100, base_mean * high / 100)
    else:
        per_slice = (
            [metric.value(r) for r in runs if r.variant == baseline] if metric.pooled else [
                metric.per_slice(s) for r in runs if r.variant == baseline
                for s in r.slice_figures
            ]
        )
        level = statistics.fmean(per_slice) if per_slice else 0.0
        scale = base_mean / level if level else 1.0
        pct = 100 * effect.estimate / level if level else None
        interval = (effect.low * scale, effect.high * scale)
    where = (
        f"{effect.starts[0]} + {effect.starts[1]} starts, {effect.passes} passes, {effect.df} df"
    )
    if effect.p_value is None:
        return result(pct, interval, None, "no difference", f"{where}: identical")
    said, why = verdict(
        effect.p_value, pct, effect.estimate, higher_is_better=metric.higher_is_better,
        alpha=alpha, min_effect_pct=min_effect_pct,
    )
    return result(pct, interval, effect.p_value, said, f"{where}, {why}", effect)


def compare_results(
    first: Sequence[RunRecord],
    second: Sequence[RunRecord],
    *,
    min_effect_pct: float = 0.0,
    experiment: Experiment | None = None,
) -> dict[tuple[str, str], dict[str, Comparison]]:
    """For every (workload, variant) in both result sets: ``second`` against ``first``.
    With ``experiment`` (second's), a metric its design cannot vouch for is shown without
    a verdict, as in its own report; each metric's verdicts are Holm-adjusted over the
    pairs compared."""
    keys = sorted(
        {(r.workload, r.variant) for r in first} & {(r.workload, r.variant) for r in second}
    )
    workloads = {w.name: w for w in experiment.workloads} if experiment else {}
    compared: dict[tuple[str, str], dict[str, Comparison]] = {}
    for workload, variant in keys:
        a = [r for r in first if (r.workload, r.variant) == (workload, variant)]
        b = [r for r in second if (r.workload, r.variant) == (workload, variant)]
        found = {}
        for m in METRICS:
            comparison = compare(
                [m.value(r) for r in a],
                [m.value(r) for r in b],
                higher_is_better=m.higher_is_better,
                min_effect_pct=min_effect_pct,
            )
            why = None
            if experiment is not None and workload in workloads:
                why = not_judged_because(experiment, workloads[workload], m.key)
            if why is not None:
                comparison = replace(comparison, verdict=NOT_JUDGED, reason=why, p_value=None)
            found[m.key] = comparison
        compared[(workload, variant)] = found
    for m in METRICS:
        judged = judge_family(
            [compared[key][m.key] for key in keys],
            higher_is_better=m.higher_is_better, min_effect_pct=min_effect_pct,
        )
        for key, comparison in zip(keys, judged, strict=True):
            compared[key][m.key] = comparison
    return compared
