"""What this machine can hold: an experiment's workers, threads and connections against
its available memory, open-files limit and CPUs, checked before anything starts
(``servelab.api.run``; ``--allow-beyond-machine`` skips it).

Pure functions over ``MachineFacts``; ``machine_facts`` reads the real ones, tests
pass their own. The bounds that do not depend on the machine live with the specs
(``servelab.config.base``): an open-model run's planned requests
(``MAX_REQUESTS_PER_RUN``) and a run's length (``MAX_RUN_S``).
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

from servelab.config.experiment import Experiment
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.measuring.plan import rounds_alive_at_once
from servelab.plugins.front import Front, get_front

# The memory one app-server worker adds [MiB]. Measured with /proc/PID/smaps_rollup
# (gunicorn, 4 workers, this repository's apps): a worker serving the FastAPI reference
# app has 46 MiB RSS, 33 MiB PSS, 30 MiB of its own (private) pages; one serving the
# tiny sleepy WSGI app 31, 17 and 13 MiB. tests/fixtures/results record 47-54 MiB
# (FastAPI) and 31 MiB (sleepy) peak RSS per worker. RSS counts the pages a worker
# shares with its master in every worker, so it would refuse experiments that fit:
# 30 MiB is the default app's worker's own memory (a heavier user app needs more, so
# the estimate errs low: it refuses what surely does not fit).
WORKER_MIB = 30.0
# Each thread of a worker [MiB]: gunicorn gthread, one worker with 1 vs 400 threads
# all busy (each in a sleeping request): 17.5 -> 28.6 MiB private, ~28 KiB a thread.
THREAD_MIB = 1 / 32
# Threads per worker: past the requests in flight a thread pool gains nothing, each
# thread reserves a stack (8 MiB of address space by default: 8 GiB at this count), and
# every thread is a task the kernel counts against pid_max (32768 on many machines).
MAX_THREADS_PER_WORKER = 1024
# Workers of one stack per CPU: each worker imports the app as it starts (0.2-0.7 s of
# CPU measured for the reference apps) and a server answers the readiness probe as soon
# as its first worker is up, so past this many the run would measure a stack still
# starting its workers (32 a CPU is 8 times gunicorn's advice of 2-4 a core).
MAX_WORKERS_PER_CPU = 32
# Files a process keeps open besides its connections: stdio, listening sockets, logs,
# epoll and pipes.
FD_RESERVE = 16
OVERRIDE = "--allow-beyond-machine to try anyway"


@dataclass(frozen=True)
class MachineFacts:
    """What bounds an experiment on this machine (``machine_facts`` reads them)."""

    available_mib: float | None  # /proc/meminfo MemAvailable; None: unknown
    open_files: int | None  # soft RLIMIT_NOFILE, which every process started inherits
    cpus: int  # usable by servelab


@dataclass(frozen=True)
class Problem:
    """One thing the machine cannot hold, with its numbers, and the fix."""

    problem: str
    fix: str


def machine_facts(meminfo: Path = Path("/proc/meminfo")) -> MachineFacts:
    """This machine's facts, now."""
    available = None
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return MachineFacts(
        available_mib=available,
        open_files=None if soft == resource.RLIM_INFINITY else soft,
        cpus=len(os.sched_getaffinity(0)),
    )


def check_fits_machine(experiment: Experiment, facts: MachineFacts | None = None) -> None:
    """SpecError (one line: every problem with its numbers and fix) unless ``experiment``
    fits this machine."""
    problems = machine_problems(experiment, machine_facts() if facts is None else facts)
    if not problems:
        return
    *first, last = problems
    earlier = "".join(f"{p.problem} (fix: {p.fix}); " for p in first)
    raise SpecError(earlier + last.problem, f"{last.fix}, or {OVERRIDE}")


def machine_problems(experiment: Experiment, facts: MachineFacts) -> list[Problem]:
    """What in ``experiment`` this machine cannot hold ([] when it fits)."""
    found = (
        threads_problem(experiment),
        workers_problem(experiment, facts.cpus),
        memory_problem(experiment, facts.available_mib),
        open_files_problem(experiment, facts.open_files),
    )
    return [problem for problem in found if problem is not None]


def threads_per_worker(stack: StackSpec) -> int:
    """The threads each worker runs: its threads and, where separate, the blocking ones."""
    return stack.server.threads + (stack.server.blocking_threads or 0)


def threads_problem(experiment: Experiment) -> Problem | None:
    """Workers with more threads than any thread pool gains from."""
    over = [s for s in experiment.stacks if threads_per_worker(s) > MAX_THREADS_PER_WORKER]
    if not over:
        return None
    worst = max(over, key=threads_per_worker)
    return Problem(
        f"{_which(worst, over)}: {threads_per_worker(worst):,} threads per worker, more than "
        f"{MAX_THREADS_PER_WORKER:,} (a thread pool gains nothing past the requests in flight, "
        "and each thread reserves a stack)",
        f"at most {MAX_THREADS_PER_WORKER:,} threads",
    )


def workers_problem(experiment: Experiment, cpus: int) -> Problem | None:
    """A stack with more workers than its CPUs start before it is measured."""
    most = MAX_WORKERS_PER_CPU * cpus
    over = [s for s in experiment.stacks if s.server.workers > most]
    if not over:
        return None
    worst = max(over, key=lambda s: s.server.workers)
    return Problem(
        f"{_which(worst, over)}: {worst.server.workers:,} workers on {cpus} "
        f"CPU{'s' if cpus != 1 else ''}, more than {most:,} ({MAX_WORKERS_PER_CPU} a CPU): "
        "the run would measure a stack still starting its workers",
        f"at most {most:,} workers",
    )


def _which(worst: StackSpec, over: list[StackSpec]) -> str:
    """"stack 'a'", or "stack 'a' (and 2 more)"."""
    more = f" (and {len(over) - 1} more)" if len(over) > 1 else ""
    return f"stack {worst.name!r}{more}"


def stack_memory_mib(stack: StackSpec) -> float:
    """The memory a stack's app server needs, about: its workers and their threads."""
    return stack.server.workers * (WORKER_MIB + threads_per_worker(stack) * THREAD_MIB)


def stacks_alive_at_once(experiment: Experiment) -> list[tuple[StackSpec, ...]]:
    """The sets of stacks the experiment keeps alive together: each stack alone for runs
    in one piece; sliced, whole rounds (one, side by side) as ``measure.plan`` starts them."""
    if experiment.slices == 1:
        return [(stack,) for stack in experiment.stacks]
    return [experiment.stacks * rounds_alive_at_once(experiment)]


def memory_problem(experiment: Experiment, available_mib: float | None) -> Problem | None:
    """The stacks alive at once needing more memory than this machine has available."""
    if available_mib is None:
        return None
    together = max(stacks_alive_at_once(experiment), key=lambda s: sum(map(stack_memory_mib, s)))
    need = sum(stack_memory_mib(stack) for stack in together)
    if need <= available_mib:
        return None
    workers = sum(stack.server.workers for stack in together)
    threads = sum(stack.server.workers * threads_per_worker(stack) for stack in together)
    what = f"{workers:,} app workers" + (f" with {threads:,} threads" if threads > workers else "")
    if len(together) == 1:
        where, fix = f"stack {together[0].name!r}", "fewer workers or threads"
    else:
        how = "side by side" if experiment.side_by_side else "measured in slices"
        where = f"{len(together)} stacks alive at once ({how})"
        fix = "fewer workers or threads, or --slices 1 to keep one stack alive at a time"
    return Problem(
        f"{what} in {where} need about {_size(need)} (~{WORKER_MIB:g} MiB a worker); this "
        f"machine has {_size(available_mib)} available",
        fix,
    )


def open_files_problem(experiment: Experiment, open_files: int | None) -> Problem | None:
    """A load whose connections need more open files in one process than the limit.

    The busiest process is the front: it holds the driver's connections and as many of
    its own to the app; without a front, the app server holds the driver's."""
    if open_files is None:
        return None
    stack, workload = max(
        ((stack, w) for stack in experiment.stacks for w in experiment.workloads),
        key=lambda pair: _files_needed(pair[0], pair[1].load.concurrency),
    )
    concurrency = workload.load.concurrency
    need = _files_needed(stack, concurrency)
    if need <= open_files:
        return None
    front: Front = get_front(stack.proxy.kind)
    holder = (
        f"{concurrency:,} connections from the driver, and as many from {front.title} to the "
        f"app, need about {need:,} open files in {front.title}"
        if front.role is not None
        else f"{concurrency:,} connections from the driver need about {need:,} open files in "
        "the app server"
    )
    return Problem(
        f"workload {workload.name!r}: {holder}; the open files limit is {open_files:,}",
        f"lower the concurrency, or raise the limit first (ulimit -n {_round_up(need)})",
    )


def _files_needed(stack: StackSpec, concurrency: int) -> int:
    connections = 2 if get_front(stack.proxy.kind).role is not None else 1
    return connections * concurrency + FD_RESERVE


def _round_up(n: int) -> int:
    """The next power of two at or above ``n`` (a limit to suggest)."""
    return 1 << max(0, n - 1).bit_length()


def _size(mib: float) -> str:
    """1536 -> '1.5 GiB'."""
    units = ["MiB", "GiB", "TiB", "PiB", "EiB"]
    while mib >= 1024 and len(units) > 1:
        mib /= 1024
        units.pop(0)
    return f"{mib:,.0f} {units[0]}" if mib >= 100 else f"{mib:.1f} {units[0]}"
