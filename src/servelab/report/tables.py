"""Seed-style tables: Test attribute | Test run 1..N | Average | Difference to baseline.

One table per (workload, variant), in the order of the experiment, like the
tables of the articles servelab reproduces, plus p99 latency and error counts
that those articles lacked. Building the table is separate from rendering it
(markdown for files, rich for the terminal).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tabulate import tabulate

from servelab.analysis.analyze import (
    METRIC_BY_KEY,
    ExperimentAnalysis,
    analyze,
    summary_line,
    verdict_line,
)
from servelab.analysis.stats import percent_change, summarize
from servelab.config.experiment import Experiment
from servelab.observe.attribution import failure_events
from servelab.report.failures import failures_markdown
from servelab.report.memory import memory_markdown
from servelab.report.timing import time_per_request_markdown
from servelab.results.records import RunResult


@dataclass(frozen=True)
class Attribute:
    label: str
    value: Callable[[RunResult], float]
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


def seed_tables(experiment: Experiment, runs: Sequence[RunResult]) -> list[SeedTable]:
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
                    stack.describe(),
                    is_baseline,
                    tuple(header),
                    tuple(rows),
                )
            )
    return tables


def table_markdown(table: SeedTable) -> str:
    header = [f"**{h}**" if h and h not in ("Difference to baseline",) else h for h in table.header]
    return tabulate(list(table.rows), headers=header, tablefmt="github", disable_numparse=True)


SUMMARISED = ("rps", "latency_mean_ms")


def verdict_lines(analysis: ExperimentAnalysis, workload: str, variant: str) -> list[str]:
    """The variant's spread (requests/s, mean latency), then its verdict against the
    baseline, one line per metric."""
    found = [v for v in analysis.for_workload(workload) if v.variant == variant]
    if not found:
        return []
    lines = [summary_line(METRIC_BY_KEY[key], found[0].metrics[key]) for key in SUMMARISED]
    return lines + [
        verdict_line(METRIC_BY_KEY[key], comparison)
        for key, comparison in found[0].comparisons.items()
    ]


def warning_lines(analysis: ExperimentAnalysis) -> list[str]:
    lines = []
    for warning in analysis.all_warnings:
        where = "/".join(x for x in (warning.variant, warning.workload) if x)
        prefix = f"{where}: " if where else ""
        lines.append(f"{prefix}{warning.message} (hint: {warning.hint})")
    return lines


def experiment_markdown(
    experiment: Experiment,
    runs: Sequence[RunResult],
    notes: Sequence[str] = (),
    *,
    min_effect_pct: float = 0.0,
) -> str:
    """The whole experiment as markdown: one section per workload, one table per variant,
    each variant's verdicts against the baseline, then the warnings."""
    from servelab.report.answer import answer_markdown, build_answer

    analysis = analyze(experiment, runs, min_effect_pct=min_effect_pct)
    lines = [f"# {experiment.name}", ""]
    lines += answer_markdown(build_answer(analysis))
    lines += [f"- {note}" for note in notes]
    if notes:
        lines.append("")
    current = None
    for table in seed_tables(experiment, runs):
        if table.workload != current:
            current = table.workload
            workload = next(w for w in experiment.workloads if w.name == current)
            lines += [f"## {current}: {workload.request.method} {workload.request.path}", ""]
        suffix = " (baseline)" if table.is_baseline else ""
        lines += [
            f"### {table.variant}{suffix}",
            "",
            f"{table.description}",
            "",
            table_markdown(table),
            "",
        ]
        lines += [f"- {line}" for line in verdict_lines(analysis, table.workload, table.variant)]
        lines.append("")
    lines += failures_markdown(experiment, runs)  # status counts beside their logged causes
    lines += time_per_request_markdown(experiment, runs)  # only for ab experiments
    lines += memory_markdown(experiment, runs)  # only when app servers are compared
    warnings = warning_lines(analysis)
    if warnings:
        lines += ["## Warnings", ""] + [f"- {line}" for line in warnings] + [""]
    return "\n".join(lines)
