"""The warnings the analysis gives, as values with a hint: each variant's (unstable,
errors, the load driver at its limit, uneven workers, neighbours, too few runs) and the
experiment's (closed loop, the machine's drift, shared CPUs, stacks that do not keep
their CPUs busy). Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from servelab.analysis.comparisons import is_sliced
from servelab.analysis.metrics import MetricSummary
from servelab.analysis.stats import runs_needed, summarize
from servelab.analysis.validity import BUSY_SHARE, idle_stacks, latency_judged
from servelab.analysis.warnings import (
    MACHINE_SPEED_SLICED_HINT,
    REPLAY_SENDER_FIX,
    REPLAY_STACK_FIX,
    ResultWarning,
    WarningKind,
)
from servelab.config.experiment import Experiment
from servelab.host.cpus import CpuPlan
from servelab.results.records import CPU_BOUND_MACHINES_DETAIL, RunRecord

UNSTABLE_CV = 0.10  # pyperf warns from a standard deviation of 10 % of the mean
DRIVER_SATURATED = 0.90  # share of its CPUs the load driver may use before it is the bottleneck
# A driver process at most this busy leaves room; the processes a bottlenecked driver
# needs are its CPU work divided by it.
DRIVER_PROCESS_TARGET = 0.7
# The driver detail that says how to spread it over processes (the hint names it).
SCALE_WITH = "scale with"
# Other processes' share of the stack's CPUs during a run above which it is flagged.
NEIGHBOURS_SHARE = 0.05
# CV of the stack CPU's own speed (servelab.observe.neighbours.cpu_speed) over an experiment's
# runs above which it is flagged: an idle 2-CPU VM here drifts by ~1-2 % in half a second.
MACHINE_SPEED_CV = 0.03
# A start whose busiest app worker used this many times the CPU of its least busy one
# is flagged: its requests were not spread over the workers.
UNEVEN_WORKERS = 1.5
UNEVEN_MIN_CPU_S = 0.2
# A replay not kept whose stack failed more than 1 % of its requests: the stack's doing.
REPLAY_STACK_FAILED = 0.01


def worker_split(run: RunRecord) -> tuple[float, float] | None:
    """CPU seconds of the run's busiest and least busy app worker (processes of role
    "app" that did at least 2 % of the app's work: a master that only supervises is
    left out, and so, for want of the worker count, is a worker that did nothing);
    None with fewer than two such workers."""
    app = [p.cpu_s for p in run.processes if p.role == "app"]
    total = sum(app)
    workers = [cpu for cpu in app if total and cpu >= 0.02 * total]
    if len(workers) < 2:
        return None
    return max(workers), min(workers)



@dataclass(frozen=True)
class _Runs:
    """One variant's runs of one workload, as the warning checks read them."""

    runs: Sequence[RunRecord]
    rps: MetricSummary
    precision_pct: float
    variant: str
    workload: str

    @property
    def by_design(self) -> bool:
        # Sliced runs are compared pass by pass: the spread between their whole-run
        # figures is the machine's drift, which the design takes out; the answer says
        # what is unclear.
        return is_sliced(self.runs)

    def warn(self, kind: WarningKind, message: str, **figures: Any) -> ResultWarning:
        return kind.warn(message, self.variant, self.workload, **figures)


def _unstable(c: _Runs) -> ResultWarning | None:
    s = c.rps.summary
    if s.n > 1 and s.cv >= UNSTABLE_CV and not c.by_design:
        return c.warn(
            WarningKind.UNSTABLE,
            f"requests/s varies by {100 * s.cv:.1f} % (std dev / mean) over {s.n} runs "
            f"(min {s.minimum:.0f}, max {s.maximum:.0f})",
        )
    return None


def _errors(c: _Runs) -> ResultWarning | None:
    errors = sum(r.load.errors for r in c.runs)
    if not errors:
        return None
    kinds: dict[str, int] = {}
    for run in c.runs:
        for code, n in run.load.status_counts.items():
            if code[0] not in "23":
                kinds[code] = kinds.get(code, 0) + n
        for kind, n in run.load.connection_errors.items():
            kinds[kind] = kinds.get(kind, 0) + n
    detail = ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items()))
    total = sum(r.load.requests_total for r in c.runs)
    return c.warn(WarningKind.ERRORS, f"{errors} of {total} requests failed ({detail})")


def _driver_saturated(c: _Runs) -> ResultWarning | None:
    for run in c.runs:
        n_cpus = len(run.driver_cpus.split(",")) if run.driver_cpus else None
        if n_cpus and run.load.duration_s > 0:
            share = run.load.driver_cpu_s / run.load.duration_s / n_cpus
            if share >= DRIVER_SATURATED:
                return c.warn(
                    WarningKind.DRIVER_SATURATED,
                    f"the load driver used {100 * share:.0f} % of its CPU in run "
                    f"{run.repetition}: the stack may be faster than measured",
                )
    return None


def _driver_bottleneck(c: _Runs) -> ResultWarning | None:
    """A driver whose processes each run on one core (Locust: one Python process each)
    near a full core, or that said so itself: the stack may be faster than measured."""
    worst = None
    for run in c.runs:
        load = run.load
        if load.duration_s <= 0 or not (load.driver_details or load.driver_overloaded):
            continue  # drivers that report neither are covered by driver-saturated
        per_process = load.driver_cpu_s / load.duration_s / load.driver_processes
        if (load.driver_overloaded or per_process >= DRIVER_SATURATED) and (
            worst is None or per_process > worst[1]
        ):
            worst = (run, per_process)
    if worst is None:
        return None
    run, per_process = worst
    load = run.load
    total = load.driver_cpu_s / load.duration_s  # cores' worth of work, all processes
    needed = max(load.driver_processes + 1, math.ceil(total / DRIVER_PROCESS_TARGET))
    said = "; the driver itself warned its CPU was above 90 %" if load.driver_overloaded else ""
    machines = load.driver_details.get(CPU_BOUND_MACHINES_DETAIL)
    if machines:  # its processes on other machines: their own figures
        text = (
            f"the load driver's workers on other machines ran near a full core in run "
            f"{run.repetition} ({machines}): they, not the stack, may set the pace"
        )
    else:
        text = (
            f"the load driver's {load.driver_processes} process(es) used "
            f"{100 * per_process:.0f} % of a core each in run {run.repetition}{said}: it, "
            "not the stack, may set the pace"
        )
    return c.warn(
        WarningKind.DRIVER_BOTTLENECK,
        text,
        needed=needed,
        how=load.driver_details.get(SCALE_WITH, "the driver's own option"),
    )


def _replay_not_kept(c: _Runs) -> ResultWarning | None:
    """A replay whose sender fell behind its schedule or left requests unsent: no verdict
    (``validity.replay_not_kept``), said here with its figures."""
    for run in c.runs:
        replay = run.load.replay
        if replay is not None and not replay.kept:
            load = run.load
            # A stack that failed requests is what held the sender up (it waits on them).
            stack = load.requests_total > 0 and load.error_share > REPLAY_STACK_FAILED
            cause = f"; {100 * load.error_share:.0f} % of its requests failed" if stack else ""
            return c.warn(
                WarningKind.REPLAY_NOT_KEPT,
                f"the sender did not keep the log's schedule in run {run.repetition}: "
                f"{'; '.join(replay.problems)}{cause}; no verdict on this variant",
                fix=REPLAY_STACK_FIX if stack else REPLAY_SENDER_FIX,
            )
    return None


def _uneven_workers(c: _Runs) -> ResultWarning | None:
    uneven = [(run, split) for run in c.runs if (split := worker_split(run)) is not None]
    worst = max(uneven, key=lambda pair: pair[1][0] / pair[1][1], default=None)
    if worst is None:
        return None
    run, (busiest, idlest) = worst
    if busiest < UNEVEN_MIN_CPU_S or busiest < UNEVEN_WORKERS * idlest:
        return None  # too little work says nothing; or even enough
    return c.warn(
        WarningKind.UNEVEN_WORKERS,
        f"in run {run.repetition} the app's busiest worker used {busiest:.2f} CPU s, "
        f"its least busy {idlest:.2f}: requests spread unevenly over the workers "
        "(e.g. upstream keepalive connections held by one), a difference between "
        "stack starts that more starts average out",
    )


def _neighbours(c: _Runs) -> ResultWarning | None:
    shares = [r.neighbour_cpu_share for r in c.runs if r.neighbour_cpu_share is not None]
    if not shares or max(shares) < NEIGHBOURS_SHARE:
        return None
    worst = max(shares)
    run = next(r for r in c.runs if r.neighbour_cpu_share == worst)
    return c.warn(
        WarningKind.NEIGHBOURS,
        f"other processes and the hypervisor (steal) took {100 * worst:.0f} % of the "
        f"stack's CPUs in run {run.repetition} (mean over runs "
        f"{100 * sum(shares) / len(shares):.0f} %): that run measured the machine's other "
        "work too",
    )


def _too_few_runs(c: _Runs) -> ResultWarning | None:
    needed = None if c.by_design else runs_needed(c.rps.values, c.precision_pct)
    if needed is None or needed <= c.rps.summary.n:
        return None
    return c.warn(
        WarningKind.TOO_FEW_RUNS,
        f"a ±{c.precision_pct:g} % answer on requests/s needs about {needed} runs; "
        f"this has {c.rps.summary.n}",
        needed=needed,
    )


# Each variant's checks, in the order their warnings are listed.
_VARIANT_CHECKS = (
    _unstable, _errors, _driver_saturated, _driver_bottleneck, _replay_not_kept,
    _uneven_workers, _neighbours, _too_few_runs,
)


def variant_warnings(
    runs: Sequence[RunRecord],
    metrics: dict[str, MetricSummary],
    precision_pct: float,
    variant: str,
    workload: str,
) -> list[ResultWarning]:
    checked = _Runs(runs, metrics["rps"], precision_pct, variant, workload)
    return [w for check in _VARIANT_CHECKS if (w := check(checked)) is not None]


def experiment_warnings(
    experiment: Experiment,
    runs: Sequence[RunRecord],
    variant_warnings: Sequence[ResultWarning],
    probed: Sequence[RunRecord],
) -> list[ResultWarning]:
    """The warnings about the whole experiment: the load model, the machine, the CPUs;
    ``runs`` as analysed, ``probed`` every run (``validity.as_measured``), with the
    variants' own warnings already found."""
    warnings = []
    # Where no latency is judged at all, the Answer says so and why (answer.latency_note).
    if latency_judged(experiment) and any(w.load.model == "closed" for w in experiment.workloads):
        warnings.append(
            WarningKind.CLOSED_LOOP.warn(
                "latency is closed-loop: each client waits for its answer before sending again, "
                "so a slow server also slows the arrivals (coordinated omission); real users' "
                "latency under the same load would be higher",
            )
        )
    speeds = [r.cpu_speed for r in runs if r.cpu_speed is not None]
    if len(speeds) > 1:
        spread = summarize(speeds)
        if spread.cv >= MACHINE_SPEED_CV:
            drift = (
                f"the machine's own speed drifted between runs: a fixed CPU loop on the "
                f"stack's CPU ran {100 * (spread.maximum / spread.minimum - 1):.0f} % faster "
                f"at best than at worst (CV {100 * spread.cv:.1f} % over {spread.n} runs)"
            )
            if not any(w.kind is WarningKind.NEIGHBOURS for w in variant_warnings):
                drift += ", with no other process on that CPU to blame"
            if experiment.slices > 1:
                warnings.append(
                    ResultWarning(
                        WarningKind.MACHINE_SPEED,
                        f"{drift}; the runs were measured in interleaved slices, so the drift "
                        "fell on every run alike, and absolute figures are an average over it",
                        MACHINE_SPEED_SLICED_HINT,
                    )
                )
            else:
                warnings.append(
                    WarningKind.MACHINE_SPEED.warn(
                        f"{drift}; differences between variants of that size are within the "
                        "machine's own drift",
                    )
                )
    plans = {(r.stack_cpus, r.driver_cpus) for r in runs}
    if any(CpuPlan(stack, driver).shared for stack, driver in plans):
        warnings.append(
            WarningKind.SHARED_CPUS.warn("the load driver and the stack shared CPUs in some runs")
        )
    idle = idle_stacks(probed)
    if idle:
        worst = min(idle, key=lambda r: r.solo_cpu_share or 0.0)
        warnings.append(
            WarningKind.NOT_CPU_BOUND.warn(
                f"{worst.variant} alone kept {100 * (worst.solo_cpu_share or 0.0):.0f} % of "
                f"its CPUs busy on {worst.workload} ({len(idle)} stack(s) below "
                f"{100 * BUSY_SHARE:.0f} %): it waits on something, so requests per CPU "
                "second side by side is not what it serves with a CPU to itself; measured "
                "in turns from there on, and only those runs are compared"
            )
        )
    return warnings
