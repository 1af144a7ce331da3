"""Fixed-rate load up to the breaking point: rates, SLO checks and the ramp's verdict.

A ramp is an ordinary experiment whose workloads are the same request at
rising arrival rates (open model: oha ``-q RATE --latency-correction``, so
latency counts from each request's intended send time and a stalled server
cannot hide behind requests that were never sent). The runner measures them
in order on one stack and stops at the first step that breaks the
experiment's SLO (``Experiment.slo``): p99 above a limit or an error ratio
above a limit. Every step is bounded: ``rate x step_s`` requests, sent in
``step_s`` seconds, each with a timeout, and the driver is killed at a hard
limit after that.

The verdict per variant: the highest rate that met the SLO before the first
step that broke it, and the lowest rate at which a 502 appeared.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from servelab.config.base import MAX_REQUESTS_PER_RUN
from servelab.config.building import describe_validation_error
from servelab.config.experiment import Experiment
from servelab.config.load import LoadSpec, SloSpec
from servelab.errors import SpecError
from servelab.plugins.server import get_server
from servelab.prepare.building import experiment_from_dict
from servelab.registry import DEFAULT_DRIVER, DEFAULT_SERVER
from servelab.results.records import RunRecord

MAX_STEPS = 40
MAX_STEP_S = 120.0
STEP_PREFIX = "rate-"


@dataclass(frozen=True)
class RampPlan:
    """The rates to try and how long each step sends."""

    start: float
    stop: float
    step: float | None = None  # additive step in req/s, or
    factor: float | None = None  # multiplicative step
    step_s: float = 5.0
    timeout_s: float = 10.0
    concurrency: int = 500  # cap on connections oha may open to keep the schedule

    def rates(self) -> list[float]:
        """start, then +step (or xfactor) up to stop; at most MAX_STEPS rates."""
        check_ramp(self)
        rates: list[float] = []
        rate = self.start
        while rate <= self.stop * (1 + 1e-9) and len(rates) < MAX_STEPS:
            rates.append(round(rate, 3))
            rate = rate + self.step if self.step is not None else rate * (self.factor or 2.0)
        if rates[-1] < self.stop and len(rates) < MAX_STEPS:
            rates.append(round(self.stop, 3))
        return rates

    def load(self, rate: float) -> LoadSpec:
        """One step: ``rate x step_s`` requests at ``rate``, bounded in time."""
        requests = max(1, math.ceil(rate * self.step_s))
        return LoadSpec(
            model="open",
            rate=rate,
            requests=requests,
            concurrency=self.concurrency,
            timeout_s=self.timeout_s,
            max_time_s=self.step_s + self.timeout_s + 5.0,
        )


def check_ramp(plan: RampPlan) -> None:
    """SpecError (one line, with the fix) for a ramp that is empty, endless or too long."""
    if not (plan.start > 0 and math.isfinite(plan.start)):
        raise SpecError(f"ramp start rate must be positive, got {plan.start:g}", "e.g. --start 10")
    if not (plan.stop >= plan.start and math.isfinite(plan.stop)):
        raise SpecError(
            f"ramp max rate {plan.stop:g} is below the start rate {plan.start:g}",
            "pass --max-rate at least --start",
        )
    if plan.step is not None and plan.factor is not None:
        raise SpecError("give a ramp --step or a --factor, not both", "drop one of them")
    if plan.step is not None and not plan.step > 0:
        raise SpecError(f"ramp step must be positive, got {plan.step:g}", "e.g. --step 50")
    if plan.factor is not None and not plan.factor > 1:
        raise SpecError(f"ramp factor must be above 1, got {plan.factor:g}", "e.g. --factor 1.5")
    if not 0 < plan.step_s <= MAX_STEP_S:
        raise SpecError(
            f"ramp step duration must be in (0, {MAX_STEP_S:g}] s, got {plan.step_s:g}",
            "e.g. --step-seconds 5",
        )
    if not plan.timeout_s > 0:
        raise SpecError(
            f"request timeout must be positive, got {plan.timeout_s:g}", "e.g. --timeout 10"
        )
    if plan.concurrency < 1:
        raise SpecError("ramp concurrency must be 1 or more", "e.g. -c 500")
    if plan.stop * plan.step_s > MAX_REQUESTS_PER_RUN:
        raise SpecError(
            f"the ramp's last step would send {plan.stop * plan.step_s:,.0f} requests "
            f"({plan.stop:g}/s for {plan.step_s:g} s), more than {MAX_REQUESTS_PER_RUN:,}",
            "lower --max-rate or --step-seconds",
        )
    steps = _count_steps(plan)
    if steps > MAX_STEPS:
        raise SpecError(
            f"the ramp from {plan.start:g} to {plan.stop:g} req/s needs {steps} steps, "
            f"more than {MAX_STEPS}",
            "raise --step or --factor, or narrow --start/--max-rate",
        )


def _count_steps(plan: RampPlan) -> int:
    if plan.step is not None:
        return int((plan.stop - plan.start) / plan.step + 1e-9) + 1
    factor = plan.factor or 2.0
    return int(math.log(plan.stop / plan.start) / math.log(factor) + 1e-9) + 1


def step_name(rate: float) -> str:
    return f"{STEP_PREFIX}{rate:g}"


def ramp_workloads(plan: RampPlan, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The ramp's steps as workload dicts (for ``experiment_from_dict``), slowest first."""
    return [
        {"name": step_name(rate), "request": request, "load": plan.load(rate).model_dump()}
        for rate in plan.rates()
    ]


def slo_problem(result: RunRecord, slo: SloSpec) -> str | None:
    """Why ``result`` breaks ``slo`` (None when it meets it)."""
    load = result.load
    if load.requests_total == 0:
        return "no request completed"
    ratio = load.error_share
    if ratio > slo.max_error_ratio:
        return f"error ratio {ratio:.1%} > {slo.max_error_ratio:.1%}"
    if load.latency_p99_ms > slo.p99_ms:
        return f"p99 {load.latency_p99_ms:,.0f} ms > {slo.p99_ms:,.0f} ms"
    return None


def ramp_should_stop(
    results: Sequence[RunRecord], variant: str, repetition: int, slo: SloSpec | None
) -> bool:
    """After a step of one launch: should the ramp stop here?

    Yes once a step broke the SLO and either a 502 was seen by now or
    ``slo.extra_steps`` more steps were spent looking for the first one.
    Never for experiments without an SLO (not ramps).
    """
    if slo is None:
        return False
    steps = [r for r in results if r.variant == variant and r.repetition == repetition]
    broke = next((i for i, r in enumerate(steps) if slo_problem(r, slo) is not None), None)
    if broke is None:
        return False
    seen_502 = any(status_count(r, "502") for r in steps)
    return seen_502 or len(steps) - 1 - broke >= slo.extra_steps


def status_count(result: RunRecord, code: str) -> int:
    return result.load.status_counts.get(code, 0)


@dataclass(frozen=True)
class RampVerdict:
    variant: str
    repetition: int
    steps: tuple[RunRecord, ...]  # in rate order
    sustainable_rate: float | None  # highest rate meeting the SLO before the first break
    broke_at: float | None  # first rate that broke it
    broke_because: str | None
    first_502_rate: float | None

    def summary(self) -> str:
        sustainable = (
            f"{self.sustainable_rate:g} req/s" if self.sustainable_rate is not None else "none"
        )
        broke = (
            f"SLO broken at {self.broke_at:g} req/s ({self.broke_because})"
            if self.broke_at is not None
            else "SLO held at every rate tried"
        )
        first = (
            f"first 502 at {self.first_502_rate:g} req/s"
            if self.first_502_rate is not None
            else "no 502"
        )
        return f"highest sustainable rate {sustainable}; {broke}; {first}"


def rate_of(result: RunRecord) -> float | None:
    if not result.workload.startswith(STEP_PREFIX):
        return None
    try:
        return float(result.workload[len(STEP_PREFIX):])
    except ValueError:
        return None


def ramp_verdicts(runs: Sequence[RunRecord], slo: SloSpec) -> list[RampVerdict]:
    """One verdict per (variant, repetition) of a ramp experiment."""
    groups: dict[tuple[str, int], list[RunRecord]] = {}
    for run in runs:
        if rate_of(run) is not None:
            groups.setdefault((run.variant, run.repetition), []).append(run)
    verdicts = []
    for (variant, repetition), steps in groups.items():
        steps.sort(key=lambda r: rate_of(r) or 0.0)
        sustainable = broke_at = first_502 = None
        because = None
        for step in steps:
            rate = rate_of(step)
            if first_502 is None and status_count(step, "502"):
                first_502 = rate
            if broke_at is None:
                problem = slo_problem(step, slo)
                if problem is None:
                    sustainable = rate
                else:
                    broke_at, because = rate, problem
        verdicts.append(
            RampVerdict(
                variant, repetition, tuple(steps), sustainable, broke_at, because, first_502
            )
        )
    return verdicts


def ramp_experiment(
    name: str,
    stack: dict[str, Any],
    request: dict[str, Any],
    plan: RampPlan,
    slo: SloSpec,
    *,
    variants: Sequence[dict[str, Any]] = (),
    repetitions: int = 1,
) -> Experiment:
    """An experiment whose workloads are the ramp's steps, measured in order on one stack
    per variant and repetition, stopping past the breaking point (see ``ramp_should_stop``).
    No warm-up: the first, slowest step warms the stack."""
    data = {
        "name": name,
        "baseline": stack,
        "variants": list(variants),
        "workloads": ramp_workloads(plan, request),
        "repetitions": repetitions,
        "driver": DEFAULT_DRIVER,  # needs the open model
        "warmup": {"requests": 0},
        "slo": slo.model_dump(),
    }
    return experiment_from_dict(data, source=name)


@dataclass(frozen=True)
class RampOptions:
    """What `servelab ramp` asks for: the stack, the request, the rates and the SLO."""

    plan: RampPlan
    p99_ms: float = 500.0
    max_error_ratio: float = 0.01
    extra_steps: int = 2
    app: str = "sleepy"
    sleep_s: float | None = None  # the sleepy app's seconds per request
    method: str = "GET"
    path: str = "/"
    body: str | None = None
    server: str = DEFAULT_SERVER
    worker_class: str | None = None  # default: sync for WSGI apps, uvicorn for ASGI
    workers: int = 2
    transport: str = "unix"
    somaxconn: int | None = None
    netns: str = "auto"
    repetitions: int = 1


def build_ramp(options: RampOptions) -> Experiment:
    """The ramp experiment for ``options``; SpecError (one line) for bad values."""
    check_ramp(options.plan)
    try:
        slo = SloSpec(
            p99_ms=options.p99_ms,
            max_error_ratio=options.max_error_ratio,
            extra_steps=options.extra_steps,
        )
    except ValidationError as exc:
        raise SpecError(
            f"ramp SLO: {describe_validation_error(exc)}",
            "--p99-ms > 0, 0 <= --max-error-ratio < 1, 0 <= --extra-steps <= 10",
        ) from None
    stack = stack_dict(
        options.app, options.sleep_s, options.server, options.worker_class, options.workers,
        options.transport, options.somaxconn, options.netns,
    )
    request: dict[str, Any] = {"method": options.method, "path": options.path}
    if options.body is not None:
        request["body"] = options.body
    return ramp_experiment(
        "ramp", stack, request, options.plan, slo, repetitions=options.repetitions
    )


def stack_dict(
    app_ref: str,
    sleep_s: float | None,
    server_kind: str,
    worker_class: str | None,
    workers: int,
    transport: str,
    somaxconn: int | None = None,
    netns: str = "auto",
) -> dict[str, Any]:
    """One stack as `servelab ramp` and `servelab capacity` choose it on the command line:
    a built-in app (the sleepy app sleeps ``sleep_s``, 0.01 s by default) behind nginx;
    SpecError (one line) for bad values."""
    app: dict[str, Any] = {"ref": app_ref}
    if sleep_s is not None:
        if not sleep_s > 0:
            raise SpecError(f"--sleep must be positive, got {sleep_s:g}", "e.g. 0.01")
        app["env"] = {"SERVELAB_SLEEP_S": f"{sleep_s:g}"}
    elif app_ref == "sleepy":
        app["env"] = {"SERVELAB_SLEEP_S": "0.01"}
    worker_class = worker_class or ("sync" if app_ref == "sleepy" else "uvicorn")
    server: dict[str, Any] = {"kind": server_kind, "workers": workers}
    if "worker_class" in get_server(server_kind).knobs:
        server["worker_class"] = worker_class
    stack = {
        "name": f"{app_ref}-{transport}",
        "app": app,
        "server": server,
        "proxy": {"transport": transport},
        "network": {"somaxconn": somaxconn, "namespace": netns},
    }
    return stack
