"""Runs measured in slices: one run's load cut into K short windows, interleaved with the
windows of every other run, then merged back into one run. Pure functions.

Why: on a machine whose own speed drifts by 5-15 % over seconds to minutes (a
virtual machine's host; measured on servelab's VM with a plain CPU loop and
nothing else running: CV 5.9 % between 10 s windows, 3.7 % between 60 s
windows), runs made one after another differ by the drift, whatever the stack.
When every run's stack is alive at once and the load visits them in turn, a
slice at a time, each run sees the same moments of the machine, and what is
left between repetitions is the stack's own restart-to-restart spread.
(Paired benchmarking tools alternate the two programs for the same reason.)

A merged run is exact where the slices allow it: counts and durations add up,
CPU seconds per process add up, peak memory is the highest peak, and the
latency figures are computed from every answered request's latency (the
driver keeps them per slice; see ``OhaDriver.latencies_ms``) with the
nearest-rank percentile. ``run_record`` puts a run's record together, from its one
window or from its slices merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servelab.config.experiment import Experiment
from servelab.config.load import LoadSpec, Workload
from servelab.host.cpus import CpuPlan
from servelab.measuring.executor import Window
from servelab.measuring.plan import Launch
from servelab.results.records import (
    ListenQueue,
    LoadMachine,
    LoadMeasurement,
    NamedRequests,
    ProcessUsage,
    RunRecord,
    SliceFigures,
    percentile,
    weighted_percentile,
)


def slice_loads(load: LoadSpec, slices: int) -> list[LoadSpec]:
    """``load`` cut into ``slices`` parts: equal durations, or request counts that add up."""
    if slices == 1:
        return [load]
    if load.duration_s is not None:
        part = load.model_copy(update={"duration_s": load.duration_s / slices})
        return [part] * slices
    assert load.requests is not None  # LoadSpec requires one of the two
    base, extra = divmod(load.requests, slices)
    return [
        load.model_copy(update={"requests": base + (1 if i < extra else 0)})
        for i in range(slices)
    ]


def slice_figures(
    load: LoadMeasurement, usage: Sequence[ProcessUsage], pass_number: int, started_at: str
) -> SliceFigures:
    """The raw record of one measured slice."""
    errors = {code: n for code, n in load.status_counts.items() if code[0] not in "23"}
    errors.update(load.connection_errors)
    return SliceFigures(
        pass_number=pass_number,
        started_at=started_at,
        requests=load.requests_total,
        duration_s=load.duration_s,
        rps=load.rps,
        latency_mean_ms=load.latency_mean_ms,
        latency_p50_ms=load.latency_p50_ms,
        latency_p90_ms=load.latency_p90_ms,
        latency_p99_ms=load.latency_p99_ms,
        errors={k: n for k, n in errors.items() if n},
        stack_cpu_s=round(sum(p.cpu_s for p in usage), 4),
    )


def _add_counts(dicts: Sequence[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for counts in dicts:
        for key, n in counts.items():
            total[key] = total.get(key, 0) + n
    return total


def merge_loads(
    parts: Sequence[LoadMeasurement],
    latencies_ms: Sequence[float],
    weights: Sequence[float] = (),
) -> LoadMeasurement:
    """One measurement from its slices; latencies from every answered request's latency,
    each with its weight when given (switched slices: servelab.measuring.switching)."""
    if len(parts) == 1:
        return parts[0]
    requests = sum(p.requests_total for p in parts)
    duration = sum(p.duration_s for p in parts)
    slow = [p.slow_requests for p in parts]
    if weights:
        pairs = sorted(zip(latencies_ms, weights, strict=True))
        total = sum(w for _, w in pairs)
        mean = sum(ms * w for ms, w in pairs) / total if total else 0.0
        p50, p90, p99 = (weighted_percentile(pairs, q) for q in (50, 90, 99))
        slowest = pairs[-1][0] if pairs else 0.0
    else:
        ordered = sorted(latencies_ms)
        mean = sum(ordered) / len(ordered) if ordered else 0.0
        p50, p90, p99 = (percentile(ordered, q) for q in (50, 90, 99))
        slowest = ordered[-1] if ordered else 0.0
    return LoadMeasurement(
        driver=parts[0].driver,
        requests_total=requests,
        duration_s=duration,
        rps=requests / duration if duration > 0 else 0.0,
        latency_mean_ms=mean,
        latency_p50_ms=p50,
        latency_p90_ms=p90,
        latency_p99_ms=p99,
        latency_max_ms=slowest,
        status_counts=_add_counts([p.status_counts for p in parts]),
        connection_errors=_add_counts([p.connection_errors for p in parts]),
        bytes_received=sum(p.bytes_received for p in parts),
        driver_cpu_s=sum(p.driver_cpu_s for p in parts),
        driver_peak_rss_bytes=max(p.driver_peak_rss_bytes for p in parts),
        slow_requests=None if any(s is None for s in slow) else sum(s or 0 for s in slow),
        driver_processes=max(p.driver_processes for p in parts),
        driver_overloaded=any(p.driver_overloaded for p in parts),
        driver_details=parts[0].driver_details,
        by_name=merge_named([p.by_name for p in parts], duration),
        machines=merge_machines([p.machines for p in parts]),
    )


def merge_machines(parts: Sequence[Sequence[LoadMachine]]) -> tuple[LoadMachine, ...]:
    """Per load machine over the slices: requests added, the most processes, the busiest
    process's highest CPU, any warning."""
    groups: dict[str, list[LoadMachine]] = {}
    for machines in parts:
        for machine in machines:
            groups.setdefault(machine.machine, []).append(machine)
    return tuple(
        LoadMachine(
            machine=name,
            processes=max(m.processes for m in seen),
            requests=sum(m.requests for m in seen),
            cpu_max_pct=max(m.cpu_max_pct for m in seen),
            cpu_warning=any(m.cpu_warning for m in seen),
        )
        for name, seen in sorted(groups.items())
    )


def merge_named(
    parts: Sequence[Sequence[NamedRequests]], duration_s: float
) -> tuple[NamedRequests, ...]:
    """Per request name over the slices: counts added, the mean exact, the percentiles
    the slices' request-weighted means, the highest max."""
    groups: dict[tuple[str, str], list[NamedRequests]] = {}
    for rows in parts:
        for row in rows:
            groups.setdefault((row.name, row.method), []).append(row)
    merged = []
    for rows in groups.values():
        n = sum(r.requests for r in rows)

        def weighted(field: str, rows: list[NamedRequests] = rows, n: int = n) -> float:
            return sum(getattr(r, field) * r.requests for r in rows) / n if n else 0.0

        merged.append(
            rows[0].model_copy(
                update={
                    "requests": n,
                    "failures": sum(r.failures for r in rows),
                    "rps": n / duration_s if duration_s > 0 else 0.0,
                    "latency_mean_ms": weighted("latency_mean_ms"),
                    "latency_p50_ms": weighted("latency_p50_ms"),
                    "latency_p99_ms": weighted("latency_p99_ms"),
                    "latency_max_ms": max(r.latency_max_ms for r in rows),
                    "failures_by_kind": _add_counts([r.failures_by_kind for r in rows]),
                }
            )
        )
    return tuple(sorted(merged, key=lambda r: (r.name, r.method)))


def merge_usage(parts: Sequence[Sequence[ProcessUsage]]) -> tuple[ProcessUsage, ...]:
    """Per process (by pid): CPU seconds added over the slices, the highest peak memory."""
    merged: dict[int, ProcessUsage] = {}
    for usage in parts:
        for p in usage:
            seen = merged.get(p.pid)
            merged[p.pid] = (
                p
                if seen is None
                else seen.model_copy(
                    update={
                        "cpu_s": round(seen.cpu_s + p.cpu_s, 4),
                        "peak_rss_bytes": max(seen.peak_rss_bytes, p.peak_rss_bytes),
                        "system_s": (
                            None if seen.system_s is None or p.system_s is None
                            else round(seen.system_s + p.system_s, 4)
                        ),
                    }
                )
            )
    return tuple(merged[pid] for pid in sorted(merged))


def merge_listen_queues(
    parts: Sequence[ListenQueue | None], durations_s: Sequence[float]
) -> ListenQueue | None:
    """The slices' listen-queue samples as one: the series laid end to end in time."""
    offsets = _offsets(durations_s)
    seen = [(q, at) for q, at in zip(parts, offsets, strict=True) if q is not None]
    if not seen:
        return None
    samples = sum(q.samples for q, _ in seen)
    first = seen[0][0]
    return ListenQueue(
        address=first.address,
        backlog=first.backlog,
        max_queued=max(q.max_queued for q, _ in seen),
        mean_queued=sum(q.mean_queued * q.samples for q, _ in seen) / samples if samples else 0.0,
        samples=samples,
        full_samples=sum(q.full_samples for q, _ in seen),
        series=tuple((t + offset, n) for q, offset in seen for t, n in q.series),
    )


def _offsets(durations_s: Sequence[float]) -> list[float]:
    offsets, elapsed = [], 0.0
    for d in durations_s:
        offsets.append(elapsed)
        elapsed += d
    return offsets


def merge_observed(parts: Sequence[dict[str, Any]], durations_s: Sequence[float]) -> dict[str, Any]:
    """``RunObserver.result_fields()`` of the slices as one: log lines counted over all of
    them, the first example of each class, the listen queue laid end to end."""
    if len(parts) == 1:
        return parts[0]
    examples: dict[str, str] = {}
    for part in parts:
        for cls, line in part["log_examples"].items():
            examples.setdefault(cls, line)
    notes = tuple(dict.fromkeys(note for part in parts for note in part["notes"]))
    counted = [p["front_requests_by_client"] for p in parts if "front_requests_by_client" in p]
    return {
        **parts[0],
        "log_events": _add_counts([part["log_events"] for part in parts]),
        "log_examples": examples,
        "listen_queue": merge_listen_queues([p["listen_queue"] for p in parts], durations_s),
        "notes": notes,
        **({"front_requests_by_client": _add_counts(counted)} if counted else {}),
    }


def weighted_share(shares: Sequence[float | None], durations_s: Sequence[float]) -> float | None:
    """The slices' neighbour CPU shares as one share of the whole measured time."""
    known = [(s, d) for s, d in zip(shares, durations_s, strict=True) if s is not None]
    total = sum(d for _, d in known)
    if not known or total <= 0:
        return None
    return sum(s * d for s, d in known) / total


def run_record(
    experiment: Experiment,
    cpu_plan: CpuPlan,
    favoured: bool,
    launch: Launch,
    workload: Workload,
    windows: Sequence[Window],
    warmup_rps: Sequence[tuple[int, float]],
    speed: float | None,
    passes: Sequence[int] = (),
    together: bool | None = None,
    solo_share: float | None = None,
    switched: bool | None = None,
) -> RunRecord:
    """The run's record from its one window, or from its slices merged (``cpu_plan`` and
    ``favoured``: the executor's)."""
    durations = [w.load.duration_s for w in windows]
    figures = tuple(  # a run in one piece keeps no slices
        slice_figures(w.load, w.usage, number, w.started)
        for w, number in zip(windows, passes, strict=True)
    ) if passes else ()
    return RunRecord(
        experiment=experiment.name,
        variant=launch.stack.name,
        workload=workload.name,
        repetition=launch.repetition,
        started_at=windows[0].started,
        load=merge_loads(
            [w.load for w in windows], [x for w in windows for x in w.latencies_ms],
            [x for w in windows for x in w.latency_weights]
            if any(w.latency_weights for w in windows) else (),
        ),
        processes=merge_usage([w.usage for w in windows]),
        stack_cpus=windows[0].stack_cpus or cpu_plan.stack,
        stack_cpu_quota=cpu_plan.stack_quota,
        driver_cpus=windows[0].driver_cpus or cpu_plan.driver,
        warmup_requests=sum(n for n, _ in warmup_rps),
        warmup_rps=tuple(rps for _, rps in warmup_rps),
        cpu_priority=favoured,
        neighbour_cpu_share=weighted_share([w.neighbour_share for w in windows], durations),
        cpu_speed=speed,
        slices=len(windows),
        slice_figures=figures,
        together=together,
        solo_cpu_share=solo_share,
        switched=switched,
        **merge_observed([w.observed for w in windows], durations),
    )
