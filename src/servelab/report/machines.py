"""Load by machine, for experiments whose load came from other machines (Locust's workers,
``--expect-workers``): how much each machine sent and how busy its busiest process was,
from the figures every run recorded (``LoadMeasurement.machines``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from servelab.report.base import Table
from servelab.results.records import LoadMachine, RunRecord

ABOUT = (
    "Each machine that sent load from elsewhere, over the runs it took part in, as its "
    "own reports counted: requests added; requests/s its requests over those runs' "
    "durations; share of every machine's requests; its busiest process's CPU over a run "
    "(% of one core: near 100 the machine, not the stack, set the pace), mean and highest "
    "over the runs."
)


@dataclass(frozen=True)
class MachineRow:
    machine: str
    runs: int
    processes: int  # the most it ran at once
    requests: int
    rps: float
    share: float  # of every machine's requests, 0..1
    cpu_mean_pct: float
    cpu_max_pct: float
    cpu_warnings: int  # runs in which the driver warned about its CPU


def machine_rows(runs: Sequence[RunRecord]) -> list[MachineRow]:
    """One row per load machine, by name; none when every run's load was sent from here."""
    seen: dict[str, list[tuple[RunRecord, LoadMachine]]] = {}
    for run in runs:
        for machine in run.load.machines:
            seen.setdefault(machine.machine, []).append((run, machine))
    everyone = sum(m.requests for pairs in seen.values() for _, m in pairs)
    rows = []
    for name, pairs in sorted(seen.items()):
        requests = sum(m.requests for _, m in pairs)
        duration = sum(run.load.duration_s for run, _ in pairs)
        cpu = [m.cpu_max_pct for _, m in pairs]
        rows.append(
            MachineRow(
                machine=name,
                runs=len(pairs),
                processes=max(m.processes for _, m in pairs),
                requests=requests,
                rps=requests / duration if duration > 0 else 0.0,
                share=requests / everyone if everyone else 0.0,
                cpu_mean_pct=sum(cpu) / len(cpu),
                cpu_max_pct=max(cpu),
                cpu_warnings=sum(1 for _, m in pairs if m.cpu_warning),
            )
        )
    return rows


def machines_table(runs: Sequence[RunRecord]) -> Table | None:
    """The load by machine; None when no run's load came from another machine."""
    rows = machine_rows(runs)
    if not rows:
        return None
    return Table(
        (
            "Machine", "Runs", "Processes", "Requests", "Requests/s", "Share",
            "Busiest process, mean [% CPU]", "Busiest process, max [% CPU]",
            "Driver's CPU warnings",
        ),
        tuple(
            (
                r.machine, str(r.runs), str(r.processes), f"{r.requests:,}", f"{r.rps:,.1f}",
                f"{100 * r.share:.1f} %", f"{r.cpu_mean_pct:.0f}", f"{r.cpu_max_pct:.0f}",
                str(r.cpu_warnings),
            )
            for r in rows
        ),
    )


def machines_document(runs: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """The same rows for JSON: unrounded figures, share as a fraction."""
    return [
        {
            "machine": r.machine, "runs": r.runs, "processes": r.processes,
            "requests": r.requests, "rps": r.rps, "share": r.share,
            "busiest_process_cpu_mean_pct": r.cpu_mean_pct,
            "busiest_process_cpu_max_pct": r.cpu_max_pct, "cpu_warnings": r.cpu_warnings,
        }
        for r in machine_rows(runs)
    ]
