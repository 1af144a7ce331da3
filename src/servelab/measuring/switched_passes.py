"""Switched passes on this machine: each stack's load driver started once for all of a
workload's passes, stopped before it sends anything, then let run in its stack's turns
only (SIGCONT, SIGSTOP; SIGINT after its last turn), each turn's counted part timed here
and the stack's CPU and its CPUs' neighbours read at its two ends. When they apply, the
turns, the driver's clock and a slice from its answers: ``measuring/switching.py`` (pure).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from servelab.config.load import LoadSpec, Workload
from servelab.errors import LoadDriverError
from servelab.host.cpus import CpuPlan
from servelab.host.running import RunningStack
from servelab.measuring.executor import Window
from servelab.measuring.slices import merge_usage, weighted_share
from servelab.measuring.switching import (
    SETTLE_S,
    SWITCH_S,
    TAIL_S,
    Turn,
    driver_offset,
    slice_answers,
)
from servelab.observe.metrics import ProcessSampler
from servelab.observe.neighbours import NeighbourMeter
from servelab.observe.observer import RunObserver
from servelab.plugins.driver import Answer, LoadDriver, run_load
from servelab.results.records import ProcessUsage


class SwitchedPasses:
    """``HostExecutor.measure_switched`` (mixed into it): its driver, CPU plan and notes,
    and where it runs each stack's driver, as HostExecutor keeps them."""

    driver: LoadDriver
    cpu_plan: CpuPlan
    on_driver_note: Callable[[str], None] | None

    def _slot_cpus(self, stack: RunningStack) -> tuple[str | None, str | None]:
        raise NotImplementedError  # HostExecutor's: (stack CPUs, driver CPUs)

    def _prefix(self, stack: RunningStack) -> list[str]:
        raise NotImplementedError  # HostExecutor's: the driver's argv prefix

    def measure_switched(
        self,
        stacks: Sequence[RunningStack],
        workload: Workload,
        load: LoadSpec,
        passes: Sequence[Sequence[int]],
        scratch: Path,
        on_pass: Callable[[int], None] | None = None,
    ) -> list[list[Window]]:
        """Every stack's driver started once, stopped before it sends anything, then let
        run in its stack's turns only (SIGCONT, SIGSTOP; SIGINT after its last turn, on
        which oha stops and writes what it measured). Each turn's counted part is timed
        here, and the stack's CPU and its CPUs' neighbours read at its two ends; the
        answers in it are read from the driver's per-request record afterwards."""
        turns_needed = sum(len(p) for p in passes)
        # Long enough never to end on its own: the last turn ends it (SIGINT).
        longest = load.model_copy(
            update={"duration_s": turns_needed * SWITCH_S + 10.0, "requests": None}
        )
        pids: dict[int, int] = {}
        driven: dict[int, tuple[Window, list[Answer]]] = {}

        def drive(index: int) -> None:
            stack = stacks[index]
            workdir = scratch / f"switched-{index}"
            with RunObserver(stack) as observed:
                measured = run_load(
                    self.driver, stack.url(workload.request.path), workload.request, longest,
                    workdir, cpus=self._slot_cpus(stack)[1],
                    prefix=[*self._prefix(stack), *STOPPED_UNTIL_RESUMED],
                    on_note=self.on_driver_note,
                    on_start=lambda pid: pids.__setitem__(index, pid),
                )
            driven[index] = (
                Window(time.strftime("%Y-%m-%dT%H:%M:%S%z"), measured, (),
                       observed.result_fields(), None),
                self.driver.answers(workdir),
            )

        turns: list[Turn] = []
        usage: list[tuple[ProcessUsage, ...]] = []
        shares: list[float | None] = []
        started: list[str] = []
        last_turn = {stack: i for i, stack in enumerate(t for p in passes for t in p)}
        with ThreadPoolExecutor(len(stacks), thread_name_prefix="servelab-switch") as pool:
            futures = [pool.submit(drive, i) for i in range(len(stacks))]
            ended: set[int] = set()  # sent SIGINT after their last turn
            try:
                _wait_stopped(pids, len(stacks), futures)
                index = 0
                for pass_index, order in enumerate(passes):
                    if on_pass is not None:
                        on_pass(pass_index)
                    for stack_index in order:
                        last = last_turn[stack_index] == index
                        started.append(time.strftime("%Y-%m-%dT%H:%M:%S%z"))
                        turn, used, share = _one_turn(
                            pids[stack_index], stacks[stack_index], self.cpu_plan.stack,
                            stack_index, pass_index, last=last,
                        )
                        ended |= {stack_index} if last else set()
                        turns.append(turn)
                        usage.append(used)
                        shares.append(share)
                        index += 1
                        _raise_if_failed(
                            [f for i, f in enumerate(futures) if i not in ended]
                        )
            finally:  # whatever happened, none stays stopped: each ends (SIGINT once)
                for stack_index, pid in pids.items():
                    if stack_index not in ended:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGINT)
                            os.kill(pid, signal.SIGCONT)
            for future in futures:
                future.result()
        return [
            self._switched_windows(index, driven[index], turns, usage, shares, started,
                                   len(passes))
            for index in range(len(stacks))
        ]

    def _switched_windows(
        self,
        index: int,
        driven: tuple[Window, list[Answer]],
        turns: Sequence[Turn],
        usage: Sequence[tuple[ProcessUsage, ...]],
        shares: Sequence[float | None],
        started: Sequence[str],
        passes: int,
    ) -> list[Window]:
        """Stack ``index``'s windows, one per pass, from its driver's answers."""
        whole, answers = driven
        mine = [i for i, turn in enumerate(turns) if turn.stack == index]
        offset = driver_offset(answers, [turns[i] for i in mine])
        if offset is None:  # no turn showed its first answer: the driver's clock began
            offset = turns[mine[0]].resumed  # when it first resumed, a few ms late
        windows = []
        for pass_index in range(passes):
            here = [i for i in mine if turns[i].pass_index == pass_index]
            counted = slice_answers(
                answers, [turns[i] for i in here], offset, self.driver.name
            )
            durations = [turns[i].counted_to - turns[i].counted_from for i in here]
            windows.append(Window(
                started=started[here[0]],
                load=counted.load,
                usage=merge_usage([usage[i] for i in here]),
                # Log lines and the listen queue were watched over all the turns: they
                # go with the first pass.
                observed=whole.observed if pass_index == 0 else _quiet(whole.observed),
                neighbour_share=weighted_share([shares[i] for i in here], durations),
                latencies_ms=counted.latencies_ms,
                latency_weights=counted.weights,
            ))
        # Requests that got no answer are only counted by the driver as a whole.
        failed = whole.load.connection_errors
        if failed:
            last = windows[-1]
            windows[-1] = replace(last, load=last.load.model_copy(
                update={"connection_errors": dict(failed)}
            ))
        return windows


# Prepended to a switched driver's command: it stops itself (SIGSTOP) before it becomes
# the driver, so that its clock and connections begin with its stack's first turn.
STOPPED_UNTIL_RESUMED = ("sh", "-c", 'kill -STOP $$ && exec "$@"', "servelab-switched")
_STOPPED_WAIT_S = 10.0


def _raise_if_failed(futures: Sequence[Future[None]]) -> None:
    """A driver that ended on its own (an error) ends the switched passes at once."""
    for future in futures:
        if future.done():
            future.result()
            raise LoadDriverError(
                "a switched load driver ended before its last turn",
                "run again; if it repeats, measure without --switch",
            )


def _wait_stopped(pids: dict[int, int], count: int, futures: Sequence[Future[None]]) -> None:
    """Until every driver's process exists and has stopped itself."""
    deadline = time.monotonic() + _STOPPED_WAIT_S
    while time.monotonic() < deadline:
        _raise_if_failed(futures)
        if len(pids) == count and all(_stopped(pid) for pid in pids.values()):
            return
        time.sleep(0.005)
    raise LoadDriverError(
        f"the switched load drivers did not start within {_STOPPED_WAIT_S:.0f} s",
        "check that the machine is not overloaded, or measure without --switch",
    )


def _stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


def _one_turn(
    pid: int, stack: RunningStack, stack_cpus: str | None, index: int, pass_index: int,
    last: bool,
) -> tuple[Turn, tuple[ProcessUsage, ...], float | None]:
    """Stack ``index``'s driver resumed for one turn; the stack's CPU and its CPUs'
    neighbours read at the ends of the counted part; then stopped, or ended if ``last``."""
    resumed = time.monotonic()
    os.kill(pid, signal.SIGCONT)
    sampler = ProcessSampler({role: proc.pid for role, proc in stack.processes.items()})
    neighbours = NeighbourMeter(stack_cpus)
    _sleep_until(resumed + SETTLE_S)
    sampler.sample()
    neighbours.__enter__()
    counted_from = time.monotonic()
    _sleep_until(resumed + SWITCH_S - TAIL_S)
    sampler.sample()
    neighbours.__exit__()
    counted_to = time.monotonic()
    used = sampler.usage()
    _sleep_until(resumed + SWITCH_S)
    os.kill(pid, signal.SIGINT if last else signal.SIGSTOP)
    turn = Turn(index, pass_index, resumed, counted_from, counted_to)
    return turn, used, neighbours.share(sum(p.cpu_s for p in used))


def _sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))


def _quiet(observed: dict[str, Any]) -> dict[str, Any]:
    """``observed`` without what it counted (kept once, with the first pass)."""
    return {
        **observed,
        "log_events": {},
        "log_examples": {},
        "listen_queue": None,
        "notes": (),
        **({"front_requests_by_client": {}} if "front_requests_by_client" in observed else {}),
    }
