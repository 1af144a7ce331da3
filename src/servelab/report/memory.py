"""Memory per worker of each variant's app server, for experiments that compare servers.

A run records every stack process's peak RSS (RunRecord.processes). The app
server's share is its processes' sum (master, workers and any helper) divided
by the configured workers, so a server whose master or helpers are heavy pays
for them per worker. Shared pages (forked workers share their parent's) are
counted in every process, as RSS does; the largest single process is shown too.

The front (nginx or Apache: every process of its tree) is shown beside it.
With mod_wsgi, Apache runs the app itself: its daemon processes (which the
sampler tells apart by mod_wsgi's ``(wsgi:GROUP)`` process title and gives
role "app") are the workers, counted as the app server's processes and
divided by ``workers`` (= daemon processes) like any other server's; Apache's
parent and its MPM children, which only accept connections and pass
requests to the daemons as nginx passes them to an app server, are the
front. The daemons import the app when they start, as gunicorn's workers do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.analysis.stats import summarize
from servelab.config.experiment import Experiment
from servelab.registry import DEFAULT_FRONT, PROCESS_FRONTS
from servelab.report.base import Table
from servelab.results.records import RunRecord

MIB = 2**20
FRONT_ROLES = PROCESS_FRONTS  # a front process role is its kind
ABOUT = (
    "Peak RSS of every app-server process (master, workers, helpers), summed, "
    "divided by the workers; mean over all runs of the variant. With mod_wsgi the "
    "workers are its daemon processes, and Apache's own processes are the front."
)


@dataclass(frozen=True)
class MemoryRow:
    variant: str
    server: str
    workers: int
    app_processes: float  # mean count over runs
    app_mib: float  # all app-server processes, mean over runs of each run's sum of peaks
    per_worker_mib: float
    largest_mib: float  # the biggest single app-server process
    front_mib: float  # the front's processes (nginx, or Apache's parent and children)
    front: str = DEFAULT_FRONT

    @property
    def nginx_mib(self) -> float:
        """The front's memory (named for the time nginx was the only front)."""
        return self.front_mib


def memory_rows(experiment: Experiment, runs: Sequence[RunRecord]) -> list[MemoryRow]:
    rows = []
    for stack in experiment.stacks:
        mine = [r for r in runs if r.variant == stack.name]
        if not mine:
            continue
        app = [[p.peak_rss_bytes for p in r.processes if p.role == "app"] for r in mine]
        front = [
            sum(p.peak_rss_bytes for p in r.processes if p.role in FRONT_ROLES) for r in mine
        ]
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
                front_mib=summarize([n / MIB for n in front]).mean,
                front=stack.proxy.kind,
            )
        )
    return rows


def compares_servers(experiment: Experiment) -> bool:
    """True when the variants differ in app server or front: their memory is worth a table."""
    return len({(s.server.kind, s.proxy.kind) for s in experiment.stacks}) > 1


def memory_table(experiment: Experiment, runs: Sequence[RunRecord]) -> Table | None:
    """Memory per worker of each variant with runs; None unless the experiment compares
    app servers or fronts."""
    rows = memory_rows(experiment, runs) if compares_servers(experiment) else []
    if not rows:
        return None
    return Table(
        (
            "Variant", "Server", "Workers", "App processes", "App peak RSS [MiB]",
            "Per worker [MiB]", "Largest process [MiB]", "Front", "Front [MiB]",
        ),
        tuple(
            (
                r.variant, r.server, str(r.workers), f"{r.app_processes:.0f}",
                f"{r.app_mib:.1f}", f"{r.per_worker_mib:.1f}", f"{r.largest_mib:.1f}",
                r.front, f"{r.front_mib:.1f}",
            )
            for r in rows
        ),
        label_columns=2,
    )
