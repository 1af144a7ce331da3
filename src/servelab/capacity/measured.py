"""One capacity trial measured through the executor: its load (a fixed rate, or the log at
a speed) sent to the running stack, and what the driver and the stack's processes said,
as a Trial judged (``trials.judged``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servelab.capacity.plan import CapacityPlan
from servelab.capacity.trials import Trial, judged, measured_latencies
from servelab.config.load import Workload
from servelab.host.cpus import count_cpus
from servelab.measuring.executor import MEASURED_DIR
from servelab.traffic.schedule import schedule_size


def _cpu_share(cpu_s: float, seconds: float, cpus: str | None) -> float:
    """Of the CPUs ``cpus`` (a list such as "0-1"; None: all), the share ``cpu_s`` kept
    busy over ``seconds``."""
    return cpu_s / seconds / count_cpus(cpus) if seconds else 0.0


def run_trial(
    executor: Any, stack: Any, workload: Workload, plan: CapacityPlan, rate: float,
    variant: str, number: int, scratch: Path,
) -> Trial:
    """Trial ``number`` of ``variant`` at ``rate`` (a replay's: its speed) on ``stack``."""
    driver = executor.driver
    size = None
    if workload.load.model == "replay":  # ``rate`` is the speed: the log's traffic times it
        assert workload.load.schedule is not None
        size = schedule_size(Path(workload.load.schedule))
        load = plan.replay_load(workload.load, rate, size.duration_s)
    else:
        load = plan.load(rate)
        if driver.unsupported(workload.request, load) is not None:  # it counts no requests
            load = plan.load(rate, counted=False)
    window = executor.measure(stack, workload, load, scratch)
    measured = window.load
    replay = measured.replay
    answered = len(window.latencies_ms)
    share = _cpu_share(measured.driver_cpu_s, measured.duration_s,
                       window.driver_cpus or executor.cpu_plan.driver)
    # Workers on other machines: the busiest one's process (% of a core), as they said.
    share = max([share, *(m.cpu_max_pct / 100 for m in measured.machines)])
    driver_files = scratch / MEASURED_DIR
    sent = load.requests or getattr(driver, "sent", lambda _: None)(driver_files) or answered
    send_rate = driver.send_rate(driver_files)
    # A timed driver's trial is the length of what it sent on its schedule (Locust's
    # processes each keep one, bounded by their own clocks): from what it sent.
    if size is not None:
        seconds = size.duration_s / rate
    else:
        seconds = load.requests / rate if load.requests else (
            sent / send_rate if send_rate > 0 else plan.trial_s
        )
    trial = Trial(
        variant=variant, number=number, rate=rate, started=window.started,
        seconds=seconds, sent=sent, send_rate=send_rate, answered=answered,
        errors=max(0, sent - measured.ok_responses),
        latency_ms=measured_latencies(window.latencies_ms),
        driver_cpu_share=share, connections=plan.connections,
        delivered=getattr(driver, "delivered", lambda _: {})(driver_files),
        cpu_s={f"{p.role} {p.pid}": round(p.cpu_s, 4) for p in window.usage},
        stack_cpu_share=_cpu_share(
            sum(p.cpu_s for p in window.usage), measured.duration_s,
            window.stack_cpus or executor.cpu_plan.stack,
        ) if window.usage else None,
        asked_rps=None if size is None else size.mean_rate * rate,
        replay_problems=() if replay is None else replay.problems,
        send_lag_p99_ms=None if replay is None else replay.lag_p99_ms,
        sent_share=None if replay is None else (
            replay.sent / replay.scheduled if replay.scheduled else 1.0
        ),
        peak_in_flight=None if replay is None else replay.peak_in_flight,
    )
    return judged(trial, plan.slo)
