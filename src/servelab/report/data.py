"""Every raw run as JSON and as CSV, for spreadsheets, notebooks and other tools.

JSON keeps each run record whole, as stored, under the experiment and the
machine it was measured on. CSV flattens a run to one row:
fixed columns first, then one column per HTTP status, connection error kind
and classified log event seen in any run (``status_502``, ``conn_timeout``,
``log_backlog overflow``), so that every row has every column.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from servelab.report.base import ReportInput, log_events
from servelab.results.records import RunRecord

FIXED_COLUMNS = (
    "experiment",
    "variant",
    "workload",
    "repetition",
    "started_at",
    "driver",
    "requests_total",
    "duration_s",
    "rps",
    "latency_mean_ms",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "latency_max_ms",
    "errors",
    "bytes_received",
    "driver_cpu_s",
    "driver_peak_rss_bytes",
    "stack_cpu_s",
    "stack_peak_rss_bytes",
    "stack_processes",
    "stack_cpus",
    "driver_cpus",
    "warmup_requests",
)


def runs_json(report: ReportInput) -> str:
    document = {
        "experiment": report.experiment.model_dump(mode="json", exclude_unset=True),
        "environment": dict(report.environment),
        # Only the fields the records hold: a result stored by an older servelab is
        # exported as it was stored, not padded with knobs and fields it never had.
        "runs": [run.model_dump(mode="json", exclude_unset=True) for run in report.runs],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _row(run: RunRecord) -> dict[str, Any]:
    load = run.load
    row: dict[str, Any] = {
        "experiment": run.experiment,
        "variant": run.variant,
        "workload": run.workload,
        "repetition": run.repetition,
        "started_at": run.started_at,
        "driver": load.driver,
        "requests_total": load.requests_total,
        "duration_s": load.duration_s,
        "rps": load.rps,
        "latency_mean_ms": load.latency_mean_ms,
        "latency_p50_ms": load.latency_p50_ms,
        "latency_p90_ms": load.latency_p90_ms,
        "latency_p99_ms": load.latency_p99_ms,
        "latency_max_ms": load.latency_max_ms,
        "errors": load.errors,
        "bytes_received": load.bytes_received,
        "driver_cpu_s": load.driver_cpu_s,
        "driver_peak_rss_bytes": load.driver_peak_rss_bytes,
        "stack_cpu_s": round(run.stack_cpu_s, 6),
        "stack_peak_rss_bytes": run.stack_peak_rss_bytes,
        "stack_processes": len(run.processes),
        "stack_cpus": run.stack_cpus or "",
        "driver_cpus": run.driver_cpus or "",
        "warmup_requests": run.warmup_requests,
    }
    row.update({f"status_{code}": n for code, n in load.status_counts.items()})
    row.update({f"conn_{kind}": n for kind, n in load.connection_errors.items()})
    row.update({f"log_{kind}": n for kind, n in log_events(run).items()})
    return row


def _slice_rows(run: RunRecord) -> list[dict[str, Any]]:
    """One row per slice of a sliced run, after the run's own row (``slice_pass`` set)."""
    return [
        {
            **dict.fromkeys(FIXED_COLUMNS, ""),  # what a slice has no figure for stays empty
            "experiment": run.experiment,
            "variant": run.variant,
            "workload": run.workload,
            "repetition": run.repetition,
            "slice_pass": s.pass_number,
            "started_at": s.started_at,
            "driver": run.load.driver,
            "requests_total": s.requests,
            "duration_s": s.duration_s,
            "rps": s.rps,
            "latency_mean_ms": s.latency_mean_ms,
            "latency_p50_ms": s.latency_p50_ms,
            "latency_p90_ms": s.latency_p90_ms,
            "latency_p99_ms": s.latency_p99_ms,
            "errors": s.error_count,
            "stack_cpu_s": s.stack_cpu_s,
            **{f"status_{k}" if k.isdigit() else f"conn_{k}": n for k, n in s.errors.items()},
        }
        for s in run.slice_figures
    ]


def runs_csv(report: ReportInput) -> str:
    """Every run as a row; a sliced run's slices follow it, one row each, with their pass
    in ``slice_pass`` (the column is there only when some run was sliced)."""
    rows = []
    sliced = any(run.slice_figures for run in report.runs)
    for run in report.runs:
        rows.append({**_row(run), **({"slice_pass": ""} if sliced else {})})
        rows.extend(_slice_rows(run))
    extra: dict[str, list[str]] = {"status_": [], "conn_": [], "log_": []}
    for row in rows:
        for key in row:
            for prefix, seen in extra.items():
                if key.startswith(prefix) and key not in seen:
                    seen.append(key)
    columns = list(FIXED_COLUMNS) + [k for seen in extra.values() for k in sorted(seen)]
    if sliced:
        columns.insert(columns.index("started_at"), "slice_pass")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, restval=0, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
