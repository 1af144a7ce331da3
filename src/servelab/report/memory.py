"""Memory per worker of each variant's app server, for experiments that compare servers.

A run records every stack process's peak RSS (RunResult.processes). The app
server's share is its processes' sum (master, workers and any helper) divided
by the configured workers, so a server whose master or helpers are heavy pays
for them per worker. Shared pages (forked workers share their parent's) are
counted in every process, as RSS does; the largest single process is shown too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tabulate import tabulate

from servelab.results import RunResult
from servelab.spec import Experiment
from servelab.stats import summarize

MIB = 2**20


@dataclass(frozen=True)
class MemoryRow:
    variant: str
    server: str
    workers: int
    app_processes: float  # mean count over runs
    app_mib: float  # all app-server processes, mean over runs of each run's sum of peaks
    per_worker_mib: float
    largest_mib: float  # the biggest single app-server process
    nginx_mib: float


def memory_rows(experiment: Experiment, runs: Sequence[RunResult]) -> list[MemoryRow]:
    rows = []
    for stack in experiment.stacks:
        mine = [r for r in runs if r.variant == stack.name]
        if not mine:
            continue
        app = [[p.peak_rss_bytes for p in r.processes if p.role == "app"] for r in mine]
        nginx = [sum(p.peak_rss_bytes for p in r.processes if p.role == "nginx") for r in mine]
        totals = [sum(a) / MIB for a in app]
        rows.append(
            MemoryRow(
                variant=stack.name,
                server=stack.server.kind,
                workers=stack.server.workers,
                app_processes=summarize([float(len(a)) for a in app]).mean,
                app_mib=summarize(totals).mean,
                per_worker_mib=summarize(totals).mean / stack.server.workers,
                largest_mib=summarize([max(a, default=0) / MIB for a in app]).mean,
                nginx_mib=summarize([n / MIB for n in nginx]).mean,
            )
        )
    return rows


def memory_markdown(experiment: Experiment, runs: Sequence[RunResult]) -> list[str]:
    """A "Memory per worker" section when the experiment compares app servers, else nothing."""
    if len({stack.server.kind for stack in experiment.stacks}) < 2:
        return []
    rows = memory_rows(experiment, runs)
    if not rows:
        return []
    table = tabulate(
        [
            (
                r.variant, r.server, r.workers, f"{r.app_processes:.0f}", f"{r.app_mib:.1f}",
                f"{r.per_worker_mib:.1f}", f"{r.largest_mib:.1f}", f"{r.nginx_mib:.1f}",
            )
            for r in rows
        ],
        headers=(
            "Variant", "Server", "Workers", "App processes", "App peak RSS [MiB]",
            "Per worker [MiB]", "Largest process [MiB]", "nginx [MiB]",
        ),
        tablefmt="github",
        disable_numparse=True,
    )
    return [
        "## Memory per worker",
        "",
        "Peak RSS of every app-server process (master, workers, helpers), summed, "
        "divided by the workers; mean over all runs of the variant.",
        "",
        table,
        "",
    ]
