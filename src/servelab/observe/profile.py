"""Where the stack's Python processes spent their CPU under load (``--profile``).

py-spy samples the app server's process tree from outside (its master and every worker,
those forked during the window too: ``--subprocesses``) while the load runs, and writes
folded stacks (``--format raw``). Each stack is handed back under one frame naming the
part of the stack that ran it: ``app master`` (the server's first process) or ``app
workers`` (the processes it forked). py-spy runs beside servelab (on the driver's CPUs,
in the driver's cgroup: it inherits both), is stopped with SIGINT when the load ends
(it then writes what it has), killed if it does not, and always reaped.

The window py-spy samples is not a measured one: the executor drives the stack again
with the same load right after each measured window (``HostExecutor._profile``), and
the samples are scaled to the measured window's CPU seconds. Inside the measured
windows py-spy's pauses changed the figures themselves, unevenly: quick's stacks (two
workers each, 1 s slices in turns) served 27-64 % fewer requests/s, their CPU per
request grew by 2-45 %, and no answer was clear within quick's budget (one session
against three without --profile; sampling after each window, three sessions' answers
lay inside the unprofiled sessions' intervals as often as those did in each other's:
benchmarks/why.py; docs/reports.md).

py-spy pauses each process for every sample (its default). Not pausing
(``--nonblocking``) cost less: on this project's 2-CPU VM a CPU-bound Python loop did
6.8 % less work per CPU second while py-spy paused it 100 times a second, 0.8 % less
unpaused (4 runs each, 4 s; one setting's runs spread ±6 %). But unpaused, busy request
handling was undersampled against a steady loop (likely: a stack read while it changes
is dropped, and a handler's stack changes more often than a loop's): a planted 200
µs/request spin came out at 233-244 µs/request unpaused (two experiments of 3 starts
each; the stack's CPU grew by 226-248), 192 µs/request paused (one experiment). An
explanation that names the wrong share is worse than a slower profiling window, so
servelab pauses (``NONBLOCKING``).

Turning samples into CPU per request is ``servelab.analysis.profile``'s (pure) work.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from servelab.host.procs import JANITOR, tail

RATE_HZ = 100  # py-spy's default: samples per second and process
NONBLOCKING = False  # py-spy --nonblocking (see above)
# Beyond the window's planned length, py-spy's own limit (--duration): a window that
# overruns keeps being sampled, one that hangs does not keep py-spy forever.
SLACK_S = 30.0
START_TIMEOUT_S = 5.0  # py-spy says "Sampling process" once it has attached
STOP_TIMEOUT_S = 10.0  # after SIGINT, to write its output
MASTER, WORKERS = "master", "workers"
_PROCESS_FRAME = re.compile(r'process (\d+):"[^"]*"(?:;|$)')


def label_stacks(raw: str, role: str) -> Counter[str]:
    """py-spy's folded ``--subprocesses`` output with each stack's process frames replaced
    by one frame naming its part: ``<role> master`` (the root process) or ``<role>
    workers`` (any process it forked)."""
    stacks: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        depth = 0
        while (found := _PROCESS_FRAME.match(stack)) is not None:
            depth += 1
            stack = stack[found.end():]
        part = f"{role} {MASTER if depth <= 1 else WORKERS}"
        stacks[f"{part};{stack}" if stack else part] += int(count)
    return stacks


@dataclass(frozen=True)
class WindowProfile:
    """The folded stacks of one measured window (or of a run's windows, merged)."""

    stacks: Mapping[str, int]  # folded stack (first frame: the part) -> samples
    masters: tuple[int, ...]  # the pids py-spy began at: the servers' first processes
    problems: tuple[str, ...] = ()  # why part of it is missing (one line each)
    rate_hz: int = RATE_HZ

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())


def merge_profiles(profiles: list[WindowProfile]) -> WindowProfile | None:
    """A sliced run's windows as one profile (their samples added up)."""
    if not profiles:
        return None
    stacks: Counter[str] = Counter()
    for profile in profiles:
        stacks.update(profile.stacks)
    return WindowProfile(
        dict(stacks),
        tuple(sorted({pid for p in profiles for pid in p.masters})),
        tuple(dict.fromkeys(problem for p in profiles for problem in p.problems)),
        profiles[0].rate_hz,
    )


@dataclass
class StackProfiler:
    """``with StackProfiler(exe, {"app": pid}, workdir, 10.0) as p: ...; p.profile()``:
    one py-spy per root (its whole tree), sampling until the block ends."""

    executable: str
    roots: Mapping[str, int]  # role -> pid of the server's first process (Python ones)
    workdir: Path
    planned_s: float  # the window's planned length (py-spy stops by itself past it + slack)
    rate_hz: int = RATE_HZ
    _running: list[tuple[str, int, subprocess.Popen[bytes], Path]] = field(default_factory=list)
    _profile: WindowProfile | None = None

    def __enter__(self) -> StackProfiler:
        self.workdir.mkdir(parents=True, exist_ok=True)
        limit = max(1, math.ceil(self.planned_s + SLACK_S))
        for role, pid in self.roots.items():
            out = self.workdir / f"{role}-{pid}.folded"
            log = self.workdir / f"{role}-{pid}.log"
            out.unlink(missing_ok=True)
            with open(log, "wb") as log_file:
                popen = subprocess.Popen(
                    [self.executable, "record", "--format", "raw", "--subprocesses",
                     *(["--nonblocking"] if NONBLOCKING else []),
                     "--rate", str(self.rate_hz), "--duration", str(limit),
                     "--pid", str(pid), "--output", str(out)],
                    stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            JANITOR.watch("group", popen.pid)
            self._running.append((role, pid, popen, out))
        self._wait_sampling()
        return self

    def _wait_sampling(self) -> None:
        """Until every py-spy has attached (or given up), so the window is covered."""
        deadline = time.monotonic() + START_TIMEOUT_S
        for _, _, popen, out in self._running:
            log = out.with_suffix(".log")
            while time.monotonic() < deadline and popen.poll() is None:
                with contextlib.suppress(OSError):
                    if b"Sampling" in log.read_bytes():
                        break
                time.sleep(0.01)

    def __exit__(self, *exc: object) -> None:
        stacks: Counter[str] = Counter()
        problems: list[str] = []
        for _, _, popen, _ in self._running:
            if popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    popen.send_signal(signal.SIGINT)
        for role, pid, popen, out in self._running:
            try:
                popen.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(popen.pid, signal.SIGKILL)
                popen.wait()
            JANITOR.forget("group", popen.pid)
            try:
                stacks.update(label_stacks(out.read_text(errors="replace"), role))
            except OSError:
                said = tail(out.with_suffix(".log"), 3).strip().splitlines()
                problems.append(
                    f"py-spy wrote no profile of {role} (pid {pid}): "
                    f"{said[-1] if said else f'exit status {popen.returncode}'}"
                )
        self._profile = WindowProfile(
            dict(stacks), tuple(pid for _, pid, _, _ in self._running), tuple(problems),
            self.rate_hz,
        )
        self._running = []

    def profile(self) -> WindowProfile:
        if self._profile is None:
            raise RuntimeError("the profiler has not stopped yet")
        return self._profile
