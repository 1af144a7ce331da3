"""Seed-style tables: Test attribute | Test run 1..N | Average | Difference to baseline.

One table per (workload, variant), in the order of the experiment, like the
tables of the articles servelab reproduces, plus p99 latency and error counts
that those articles lacked. Building the table is separate from rendering it
(every format renders it: report/sections.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from servelab.analysis.analyze import ExperimentAnalysis
from servelab.analysis.comparisons import verdict_line
from servelab.analysis.metrics import METRIC_BY_KEY, summary_line
from servelab.analysis.stats import percent_change, summarize
from servelab.config.experiment import Experiment
from servelab.observe.attribution import failure_events
from servelab.prepare.checks import describe_stack
from servelab.results.records import RunRecord


@dataclass(frozen=True)
class Attribute:
    label: str
    value: Callable[[RunRecord], float]
    digits: int
    difference: str  # "percent", "ms" or "count"


ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute("Requests per second", lambda r: r.load.rps, 2, "percent"),
    Attribute("Time per request [ms]", lambda r: r.load.latency_mean_ms, 3, "ms"),
    Attribute("p99 latency [ms]", lambda r: r.load.latency_p99_ms, 3, "ms"),
    Attribute("Errors", lambda r: float(r.load.errors), 0, "count"),
    # Requests per second counts fast 502s too (as ab does); this row does not.
    Attribute("Successful requests per second", lambda r: r.load.ok_rps, 2, "percent"),
    # Failure lines in nginx's and the app's logs (servelab.observe.attribution), beside Errors.
    Attribute("Logged failures", lambda r: float(failure_events(r.log_events)), 0, "count"),
    Attribute(
        "Stack CPU per request [µs]",
        lambda r: 1e6 * r.stack_cpu_s / r.load.requests_total if r.load.requests_total else 0,
        1,
        "percent",
    ),
    Attribute("Stack peak RSS [MiB]", lambda r: r.stack_peak_rss_bytes / 2**20, 1, "percent"),
)


@dataclass(frozen=True)
class SeedTable:
    label_columns: ClassVar[int] = 1  # as base.Table: the attribute names the row

    workload: str
    variant: str
    description: str
    is_baseline: bool
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def _format(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def _difference(kind: str, baseline: float, value: float, digits: int) -> str:
    if kind == "percent":
        change = percent_change(baseline, value)
        return "n/a" if change is None else f"{change:+.2f} %"
    if kind == "ms":
        return f"{value - baseline:+.{digits}f} ms"
    return f"{value - baseline:+.0f}"


def seed_tables(experiment: Experiment, runs: Sequence[RunRecord]) -> list[SeedTable]:
    """Tables for every (workload, variant) that has at least one run."""
    tables = []
    for workload in experiment.workloads:
        by_variant = {
            stack.name: sorted(
                (r for r in runs if r.variant == stack.name and r.workload == workload.name),
                key=lambda r: r.repetition,
            )
            for stack in experiment.stacks
        }
        baseline_runs = by_variant[experiment.baseline.name]
        n_columns = max((len(v) for v in by_variant.values()), default=0)
        for stack in experiment.stacks:
            variant_runs = by_variant[stack.name]
            if not variant_runs:
                continue
            is_baseline = stack.name == experiment.baseline.name
            header = ["Test attribute", *(f"Test run {r.repetition}" for r in variant_runs)]
            header += [""] * (n_columns - len(variant_runs)) + ["Average"]
            if not is_baseline:
                header.append("Difference to baseline")
            rows = []
            for attribute in ATTRIBUTES:
                values = [attribute.value(r) for r in variant_runs]
                average = summarize(values).mean
                row = [attribute.label, *(_format(v, attribute.digits) for v in values)]
                row += [""] * (n_columns - len(values)) + [_format(average, attribute.digits)]
                if not is_baseline:
                    if baseline_runs:
                        base = summarize([attribute.value(r) for r in baseline_runs]).mean
                        row.append(
                            _difference(attribute.difference, base, average, attribute.digits)
                        )
                    else:
                        row.append("no baseline runs")
                rows.append(tuple(row))
            tables.append(
                SeedTable(
                    workload.name,
                    stack.name,
                    describe_stack(stack),
                    is_baseline,
                    tuple(header),
                    tuple(rows),
                )
            )
    return tables


SUMMARISED = ("rps", "latency_mean_ms")


class Verdict(NamedTuple):
    kind: str  # the comparison's verdict: better, worse, no significant difference, ...
    text: str  # analysis.verdict_line


@dataclass(frozen=True)
class VariantTable:
    """A seed table with the variant's spread over its runs (requests/s, mean latency) and
    its verdicts against the baseline, one per metric."""

    table: SeedTable
    spread: tuple[str, ...]
    verdicts: tuple[Verdict, ...]


def variant_tables(analysis: ExperimentAnalysis, runs: Sequence[RunRecord]) -> list[VariantTable]:
    """Every seed table of ``runs`` (report/tables.py), with its spread and verdicts."""
    found = {(v.workload, v.variant): v for v in analysis.variants}
    tables = []
    for table in seed_tables(analysis.experiment, runs):
        variant = found[table.workload, table.variant]  # both have a run of it
        spread = tuple(
            summary_line(METRIC_BY_KEY[key], variant.metrics[key]) for key in SUMMARISED
        )
        verdicts = tuple(
            Verdict(comparison.verdict, verdict_line(METRIC_BY_KEY[key], comparison))
            for key, comparison in variant.comparisons.items()
        )
        tables.append(VariantTable(table, spread, verdicts))
    return tables
