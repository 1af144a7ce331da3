"""Failures and their causes, beside the seed tables: status counts, classified log
lines, the listen queue, and (for ramps) the breaking point.

Built as tables of formatted cells (``base.Table``) and lines, which every format
renders alike (report/sections.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from servelab.config.experiment import Experiment
from servelab.measuring.ramp import ramp_verdicts, rate_of, slo_problem
from servelab.observe.attribution import EVENT_BY_KEY, describe_counts
from servelab.report.base import Table
from servelab.results.records import RunRecord


def describe_statuses(runs: Sequence[RunRecord]) -> str:
    """'200 x134, 502 x66' (HTTP codes) then 'timeout x3' (no answer), summed over ``runs``."""
    codes: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for run in runs:
        codes.update(run.load.status_counts)
        errors.update(run.load.connection_errors)
    parts = [f"{code} x{n}" for code, n in sorted(codes.items()) if n]
    parts += [f"{kind} x{n}" for kind, n in sorted(errors.items()) if n]
    return ", ".join(parts) or "-"


def _events(runs: Sequence[RunRecord]) -> Counter[str]:
    total: Counter[str] = Counter()
    for run in runs:
        total.update(run.log_events)
    return total


def _queue(runs: Sequence[RunRecord], app_backlog: int | None = None) -> str:
    """'min(1024, 128) = 128, max 129 waiting': the effective backlog (app backlog,
    somaxconn), as ss measured it, and the longest queue seen."""
    queues = [r.listen_queue for r in runs if r.listen_queue is not None]
    somaxconn = runs[0].somaxconn
    formula = (
        f"min({app_backlog}, {somaxconn}) = " if app_backlog and somaxconn is not None else ""
    )
    if not queues:
        backlogs = {r.listen_backlog for r in runs if r.listen_backlog is not None}
        return f"{formula}{min(backlogs)}, not sampled" if backlogs else "-"
    measured = max(q.backlog for q in queues)
    return f"{formula}{measured}, max {max(q.max_queued for q in queues)} waiting"


def _row(
    workload: str, variant: str, mine: Sequence[RunRecord], app_backlog: int | None = None
) -> tuple[str, ...]:
    requests = sum(r.load.requests_total for r in mine)
    failed = sum(r.load.errors for r in mine)
    slow = [r.load.slow_requests for r in mine if r.load.slow_requests is not None]
    return (
        workload,
        variant,
        f"{requests:,}",
        f"{failed:,} ({failed / requests:.1%})" if requests else "-",
        describe_statuses(mine),
        describe_counts(_events(mine)),
        f"{sum(slow):,}" if slow else "-",
        f"{max(r.load.latency_p50_ms for r in mine):,.0f} / "
        f"{max(r.load.latency_p99_ms for r in mine):,.0f}",
        _queue(mine, app_backlog),
    )


def failure_rows(experiment: Experiment, runs: Sequence[RunRecord]) -> Table:
    """One row per (workload, variant), summed over its repetitions; with several
    workloads (or a ramp), one "(all)" row per variant."""
    rows = []
    for workload in experiment.workloads if experiment.slo is None else ():
        for stack in experiment.stacks:
            mine = [r for r in runs if r.variant == stack.name and r.workload == workload.name]
            if mine:
                rows.append(_row(workload.name, stack.name, mine, stack.server.backlog))
    # A ramp's steps are in the ramp table; here only their sum.
    if len(experiment.workloads) > 1 or experiment.slo is not None:
        for stack in experiment.stacks:
            mine = [r for r in runs if r.variant == stack.name]
            if mine:
                rows.append(_row("(all)", stack.name, mine, stack.server.backlog))
    header = (
        "Workload",
        "Variant",
        "Requests",
        "Failed",
        "Status counts",
        "Log events (nginx + app)",
        "Slow",
        "p50 / p99 [ms]",
        "Listen backlog (measured by ss)",
    )
    return Table(header, tuple(rows), label_columns=2)


def cause_lines(runs: Sequence[RunRecord]) -> list[str]:
    """One line per event class seen: count, what it means, the fix, and a real log line."""
    counts = _events(runs)
    examples: dict[str, str] = {}
    for run in runs:
        for key, line in run.log_examples.items():
            examples.setdefault(key, line)
    lines = []
    for key in EVENT_BY_KEY:
        if not counts.get(key):
            continue
        event = EVENT_BY_KEY[key]
        fix = f" Fix: {event.fix}." if event.fix else ""
        example = f' e.g. "{short_line(examples[key])}"' if key in examples else ""
        lines.append(f"{key} x{counts[key]}: {event.cause}.{fix}{example}")
    return lines


def short_line(line: str, limit: int = 200) -> str:
    """A log line without nginx's trailing request details, at most ``limit`` characters."""
    line = line.split(", client: ", 1)[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def placement_notes(runs: Sequence[RunRecord]) -> list[str]:
    notes: list[str] = []
    for run in runs:
        for note in run.notes:
            if note not in notes:
                notes.append(note)
    return notes


def ramp_rows(experiment: Experiment, runs: Sequence[RunRecord]) -> Table | None:
    """The ramp's steps (rate order) with the SLO verdict of each; None if not a ramp."""
    if experiment.slo is None:
        return None
    slo = experiment.slo
    rows = []
    for verdict in ramp_verdicts(runs, slo):
        for step in verdict.steps:
            load = step.load
            problem = slo_problem(step, slo)
            rows.append(
                (
                    verdict.variant,
                    str(verdict.repetition),
                    f"{rate_of(step):g}",
                    f"{load.rps:,.1f}",
                    f"{load.latency_p50_ms:,.1f}",
                    f"{load.latency_p99_ms:,.1f}",
                    describe_statuses([step]),
                    describe_counts(step.log_events),
                    "ok" if problem is None else f"broken: {problem}",
                )
            )
    header = (
        "Variant", "Run", "Rate [req/s]", "Achieved [req/s]", "p50 [ms]", "p99 [ms]",
        "Status counts", "Log events", f"SLO (p99 <= {slo.p99_ms:g} ms, "
        f"errors <= {slo.max_error_ratio:.1%})",
    )
    return Table(header, tuple(rows), label_columns=2)


def ramp_summary_lines(experiment: Experiment, runs: Sequence[RunRecord]) -> list[str]:
    if experiment.slo is None:
        return []
    return [
        f"{v.variant} run {v.repetition}: {v.summary()}"
        for v in ramp_verdicts(runs, experiment.slo)
    ]
