"""Where the CPU went in one run, per request: its folded stacks turned into CPU µs per
request by part of the stack and by function (``RunProfile``). Pure. Comparing a variant's
with the baseline's is ``servelab.analysis.explain``'s.

A run's samples are only proportions: each part's samples (``app master``, ``app
workers``) are scaled to the CPU seconds that part was measured to use in the window
(``ProcessUsage``, as every run records them), then divided by the run's requests. A
part with CPU and no samples (a front, which is not Python) keeps its CPU as one frame of
its own, so a run's stacks add up to its stack CPU per request. Samples of threads
blocked on a lock or queue (``WAITING``) are left out first. A function's figure is
its self time (the stacks where it is the innermost frame), so functions add up too.

Kernel time is measured, not sampled. py-spy sees a thread in a system call only as the
Python frame that made it, and it counts a thread as busy whenever the OS says it is
runnable: running, or waiting for a CPU (on the seed app's 1 MB answers, 2 workers and
nginx on one CPU, py-spy took 3.1-4.0 samples per CPU second of the workers; one
spinning process sharing a CPU with another: 499 samples in 5 s for 2.2-2.3 s of CPU).
Scaled to the part's whole CPU, those samples charged the TCP transport's extra kernel
time (+500-840 µs/request of the workers' system time, measured) to the function the
workers waited longest in, pydantic's ``TypeAdapter.dump_json`` (-650 … -970 µs/request
"saved" by a unix socket, while the workers' user time did not drop at all). So where a
run recorded its processes' system time, each part's system time is a ``KERNEL`` line of
its own and the samples share only its user time. What remains is the waiting: a
function that runs long stretches gains the waits of a CPU shared with other processes;
``RunProfile.waited`` (sampled seconds per CPU second) says how much, and an
explanation says so past ``servelab.analysis.explain.WAITED``.

That kernel line cost the functions whose own work is system calls their size: a
function that spent half its time in system calls (a clock read by system call in a
loop, as code that logs, writes files or talks to sockets makes them) read at less than
half its planted CPU, the kernel line and the waits holding the rest (issue 37). py-spy
now unwinds native frames too (``servelab.observe.profile``), and a sample says whether
its thread was in a system call (``IN_KERNEL``) or woken and waiting for a CPU in one
(``WAITING_IN_KERNEL``: an ``epoll_wait`` returning, a thread retaking the GIL). A part
whose samples say so (``native_parts``) has its waiting samples left out and its whole
CPU, user and system, shared by the rest: a system call's kernel time is charged to the
Python frames that made it. Not split by kind: a sample taken in user space is often
delivered at the thread's next system call (py-spy stops the thread with a signal), so
the samples of a loop that makes system calls come out 68-83 % in the kernel for 56-69 %
measured, and a user/system split would move its user time to functions that make none
(``benchmarks/why.py planted``; docs/validation/why.md). Profiles stored before keep the
kernel line.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from servelab.observe.profile import IN_KERNEL, WAITING_IN_KERNEL
from servelab.results.records import ProcessUsage, RunRecord

Stack = tuple[str, ...]
# Innermost frames of a thread blocked on a lock or a queue. py-spy, pausing the process,
# counts such a thread as busy (it waits in a futex, as a thread waiting for the GIL does;
# a sleep or a select it counts as idle): 80 % of the samples of the seed app's sync
# endpoints were its idle thread pool in Condition.wait. Those samples are left out.
WAITING = frozenset({
    "Condition.wait (threading.py)",
    "Semaphore.acquire (threading.py)",
    "Thread._wait_for_tstate_lock (threading.py)",
    "_worker (concurrent/futures/thread.py)",  # its leaf only while it waits for work
})
NOT_PROFILED = "(not profiled: not Python)"
NOT_SAMPLED = "(no samples)"
# A part's system time (the kernel's work in its system calls), measured, as a frame of
# its own: py-spy sees only the Python frame that made the call (see the module's doc).
KERNEL = "(kernel: system calls)"
SYNTHETIC = frozenset({NOT_PROFILED, NOT_SAMPLED, KERNEL})
_LINE_NUMBER = re.compile(r" \(([^()]*?):\d+\)$")


def parse_folded(text: str) -> dict[Stack, float]:
    """``a;b;c 12`` lines as {("a", "b", "c"): 12}; lines that are not folded stacks are
    skipped, the same stack twice is added up."""
    stacks: dict[Stack, float] = defaultdict(float)
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        try:
            value = float(count)
        except ValueError:
            continue
        if stack:
            stacks[tuple(stack.split(";"))] += value
    return dict(stacks)


# A frame's function and a stack's names depend on the text alone: worked out once per
# distinct frame and stack (a report explains the same stacks again after every block;
# the regex was most of its time: benchmarks/analysis_cost.py).
@functools.lru_cache(maxsize=1 << 16)
def frame_function(frame: str) -> str:
    """A frame without its line number: ``handle (app.py:12)`` -> ``handle (app.py)``."""
    return _LINE_NUMBER.sub(r" (\1)", frame)


def _part_names(processes: Sequence[ProcessUsage], masters: Sequence[int]) -> list[str]:
    """Each process's part of the stack: a role with one process is itself ("nginx",
    "app"); with more, its first process (a pid in ``masters``, or none) is "<role>
    master" and the rest "<role> workers"."""
    members: dict[str, int] = defaultdict(int)
    for process in processes:
        members[process.role] += 1
    return [
        process.role if members[process.role] == 1
        else f"{process.role} {'master' if process.pid in masters else 'workers'}"
        for process in processes
    ]


def part_cpu_s(processes: Sequence[ProcessUsage], masters: Sequence[int]) -> dict[str, float]:
    """CPU seconds (user + system) of each part of the stack (``_part_names``)."""
    parts: dict[str, float] = defaultdict(float)
    for part, process in zip(_part_names(processes, masters), processes, strict=True):
        parts[part] += process.cpu_s
    return dict(parts)


def part_system_s(
    processes: Sequence[ProcessUsage], masters: Sequence[int]
) -> dict[str, float] | None:
    """Of each part's CPU seconds, the system time; None when a process's is unknown
    (records stored before it was recorded)."""
    if any(process.system_s is None for process in processes):
        return None
    parts: dict[str, float] = defaultdict(float)
    for part, process in zip(_part_names(processes, masters), processes, strict=True):
        parts[part] += process.system_s or 0.0
    return dict(parts)


@dataclass(frozen=True)
class RunProfile:
    """One run's CPU per request (µs), by part of the stack and by stack."""

    variant: str
    workload: str
    repetition: int
    requests: int
    parts: Mapping[str, float]
    stacks: Mapping[Stack, float]  # first frame: the part
    # py-spy's samples of each sampled part as seconds (samples / rate), and the CPU
    # seconds the part used in the measured window: their ratio is how much of a sampled
    # thread's time it waited for a CPU (about 1: none; 2: half).
    sampled_s: Mapping[str, float] = field(default_factory=dict)
    cpu_s: Mapping[str, float] = field(default_factory=dict)
    # The concurrency a crowded stack was profiled at (its figures are that window's);
    # None: the measured window's load, and its figures.
    concurrency: int | None = None

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def functions(self) -> dict[str, float]:
        """Self time by function (its innermost frames), line numbers left out."""
        found: dict[str, float] = defaultdict(float)
        for stack, value in self.stacks.items():
            found[leaf_name(stack)] += value
        return dict(found)

    def waited(self) -> float | None:
        """Sampled seconds per CPU second of the sampled parts (None without samples)."""
        cpu = sum(self.cpu_s.get(part, 0.0) for part in self.sampled_s)
        return sum(self.sampled_s.values()) / cpu if cpu > 0 and self.sampled_s else None


def is_synthetic(name: str) -> bool:
    """A line that is a part's measured figure (its kernel time, a part not profiled),
    not a function."""
    return any(name.endswith(frame) for frame in SYNTHETIC)


def leaf_name(stack: Stack) -> str:
    """The function a stack's self time is charged to; a part's synthetic frames
    (``NOT_PROFILED``, ``KERNEL``...) keep the part's name: ``nginx (kernel: ...)``."""
    leaf = stack[-1] if len(stack) > 1 else NOT_SAMPLED
    return f"{stack[0]} {leaf}" if leaf in SYNTHETIC else frame_function(leaf)


def native_parts(samples: Mapping[Stack, float]) -> frozenset[str]:
    """The parts (a stack's first frame) whose samples say where their threads were in
    the kernel (py-spy ``--native``: some end in ``IN_KERNEL`` or ``WAITING_IN_KERNEL``)."""
    return frozenset(
        stack[0] for stack in samples if stack[-1] in (IN_KERNEL, WAITING_IN_KERNEL)
    )


def _sampled_stack(stack: Stack, part: str) -> Stack | None:
    """A sample's stack under ``part``, charged to the Python frames that made its system
    call (``IN_KERNEL`` left out; with no Python frame, the part's ``KERNEL``); None for a
    thread that waited (``WAITING``, ``WAITING_IN_KERNEL``), which py-spy counts as busy."""
    if len(stack) > 1 and (stack[-1] == WAITING_IN_KERNEL or frame_function(stack[-1]) in WAITING):
        return None
    if stack[-1] == IN_KERNEL:
        return (part, *stack[1:-1]) if len(stack) > 2 else (part, KERNEL)
    return (part, *stack[1:])


def sampled_per_cpu_s(stacks: Mapping[str, int], rate_hz: int, cpu_s: float) -> float | None:
    """py-spy's samples (``WindowProfile.stacks``) of threads that ran or waited for a CPU
    (``WAITING`` ones left out) as seconds, per CPU second the sampled processes used:
    about 1 when no thread waited for a CPU (``RunProfile.waited``'s figure, before a run
    is stored). None without CPU."""
    if cpu_s <= 0:
        return None
    counted = sum(
        count for text, count in stacks.items()
        if _sampled_stack(stack := tuple(text.split(";")), stack[0]) is not None
    )
    return counted / rate_hz / cpu_s


def run_profile(run: RunRecord, folded: str) -> RunProfile:
    """``run``'s folded stacks (as ``results.profiles`` stores them) per request. A part
    whose samples say where its threads were in the kernel (``native_parts``) shares its
    whole CPU among its samples, its system calls' kernel time charged to the frames that
    made them. Otherwise, where the run recorded its processes' system time, a part's
    samples share its user time and its system time is a ``KERNEL`` frame of its own."""
    masters = run.profile.masters if run.profile is not None else ()
    rate = run.profile.rate_hz if run.profile is not None else 100
    # A crowded stack's profile was driven at a concurrency of its own: scaled to that
    # window's CPU and requests (see ProfileInfo.concurrency).
    own = run.profile if run.profile is not None and run.profile.concurrency else None
    processes = own.processes if own else run.processes
    cpu = part_cpu_s(processes, masters)
    system = part_system_s(processes, masters)
    samples = parse_folded(folded)
    requests = max(own.requests if own else run.load.requests_total, 1)
    # The sampled stacks name "app master"/"app workers"; a role of one process is "app".
    single = {part for part in cpu if " " not in part}

    def part_of(frame: str) -> str:
        role = frame.split(" ")[0]
        return role if role in single else frame

    native = {part_of(part) for part in native_parts(samples)}
    by_part: dict[str, float] = defaultdict(float)
    relabelled: dict[Stack, float] = defaultdict(float)
    for stack, count in samples.items():
        part = part_of(stack[0])
        charged = _sampled_stack(stack, part)
        if charged is None:
            continue
        relabelled[charged] += count
        by_part[part] += count
    stacks: dict[Stack, float] = {}
    for part, seconds in cpu.items():
        us = 1e6 * seconds / requests
        kernel_us = 1e6 * min(system.get(part, 0.0), seconds) / requests if system else 0.0
        if by_part.get(part, 0.0) > 0 and part in native:
            kernel_us = 0.0  # the samples in system calls hold it
        if kernel_us > 0:
            stacks[(part, KERNEL)] = kernel_us
            us -= kernel_us
        total = by_part.get(part, 0.0)
        if total <= 0:
            if us > 0:
                role = part.split(" ")[0]
                sampled = any(p.split(" ")[0] == role for p in by_part)
                stacks[(part, NOT_SAMPLED if sampled else NOT_PROFILED)] = us
            continue
        for stack, count in relabelled.items():
            if stack[0] == part:
                stacks[stack] = us * count / total
    parts = {part: 1e6 * seconds / requests for part, seconds in cpu.items()}
    sampled_s = {part: count / rate for part, count in by_part.items() if part in cpu}
    return RunProfile(
        run.variant, run.workload, run.repetition, requests, parts, stacks, sampled_s, cpu,
        own.concurrency if own else None,
    )


def run_profiles(
    runs: Sequence[RunRecord], folded: Mapping[tuple[str, str, int], str]
) -> list[RunProfile]:
    """Every run with folded stacks in ``folded`` ((variant, workload, repetition) ->
    text: ``results.profiles.read_profiles``), per request."""
    return [
        run_profile(run, folded[key])
        for run in runs
        if (key := (run.variant, run.workload, run.repetition)) in folded
    ]


def mean_stacks(profiles: Sequence[RunProfile]) -> dict[Stack, float]:
    """The stacks' CPU per request, averaged over starts (a flame graph's widths)."""
    total: dict[Stack, float] = defaultdict(float)
    for profile in profiles:
        for stack, value in profile.stacks.items():
            total[stack] += value / len(profiles)
    return dict(total)
