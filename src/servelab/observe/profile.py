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
benchmarks/why.py; docs/validation/why.md).

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

py-spy unwinds each sample's native frames too (``--native``), for what they say of
the kernel, which Python frames cannot: a thread whose innermost native frames are a
system call's C library wrapper (``send``, ``fstatat64``, a clock read that the vDSO
hands to the kernel) was in the kernel, and its sample ends in ``IN_KERNEL``; one
whose native frames wait (``epoll_wait``, a condition or a lock: the GIL) was
runnable only because it had just been woken, and ends in ``WAITING_IN_KERNEL``
(py-spy counts a thread as busy whenever the OS says it is runnable, and it reads
that before pausing the process). The native frames themselves are then left out, so
stacks stay Python frames, the same in every process and run. Unwinding costs py-spy
more CPU per sample (``benchmarks/profile_overhead.py native``), on the driver's CPUs,
in a window that is not measured.

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
from servelab.results.records import ProcessUsage

RATE_HZ = 100  # py-spy's default: samples per second and process
NONBLOCKING = False  # py-spy --nonblocking (see above)
NATIVE = True  # py-spy --native: whether a sample was in a system call (see above)
# A sample's last frame when its thread was in a system call, or waiting in the kernel
# (woken, not yet running): stored so, in place of its native frames.
IN_KERNEL = "(in a system call)"
WAITING_IN_KERNEL = "(waiting in the kernel)"
# Beyond the window's planned length, py-spy's own limit (--duration): a window that
# overruns keeps being sampled, one that hangs does not keep py-spy forever.
SLACK_S = 30.0
START_TIMEOUT_S = 5.0  # py-spy says "Sampling process" once it has attached
STOP_TIMEOUT_S = 10.0  # after SIGINT, to write its output
MASTER, WORKERS = "master", "workers"
_PROCESS_FRAME = re.compile(r'process (\d+):"[^"]*"(?:;|$)')
# A Python frame: ``name (file.py:12)``; a native one names a C file, a library or an
# address: ``sock_send (socketmodule.c:4207)``, ``send (libc.so.6)``, ``0x7f12 ([vdso])``.
_PYTHON_FRAME = re.compile(r" \((?:[^()]*\.pyx?|<[^()]*>):\d+\)$")
# The C library's names for its system-call wrappers, as py-spy reads them from its symbol
# table (``_syscall_name`` strips ``__GI___libc_`` and ``64``). Waiting ones first: a
# sample in them is a thread woken and not yet running (or blocked: py-spy's race).
WAITING_CALLS = frozenset({
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect",
    "nanosleep", "clock_nanosleep", "pause", "sigsuspend", "sigtimedwait", "sigwaitinfo",
    "wait4", "waitpid", "waitid", "pthread_cond_wait", "pthread_cond_timedwait",
    "pthread_cond_clockwait", "pthread_mutex_lock", "pthread_mutex_timedlock",
    "pthread_join", "sem_wait", "sem_timedwait", "sem_clockwait", "lll_lock_wait",
    "futex_abstimed_wait_common", "futex_abstimed_wait_cancelable", "do_futex_wait",
    "PyThread_acquire_lock_timed", "take_gil", "PyEval_RestoreThread",
})
SYSTEM_CALLS = frozenset({
    "read", "write", "readv", "writev", "pread", "pwrite", "preadv", "pwritev", "send",
    "recv", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
    "sendfile", "splice", "accept", "accept4", "connect", "bind", "listen", "shutdown",
    "socket", "socketpair", "getsockopt", "setsockopt", "getsockname", "getpeername",
    "open", "openat", "openat2", "close", "close_range", "stat", "fstat", "lstat",
    "fstatat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
    "lseek", "fsync", "fdatasync", "ftruncate", "getdents", "readlink", "readlinkat",
    "unlink", "unlinkat", "rename", "renameat", "mkdir", "rmdir", "chmod", "fchmod",
    "fcntl", "ioctl", "dup", "dup2", "dup3", "pipe", "pipe2", "eventfd", "epoll_ctl",
    "epoll_create", "epoll_create1", "mmap", "munmap", "mremap", "mprotect", "madvise",
    "brk", "sbrk", "getpid", "getppid", "gettid", "getuid", "geteuid", "getrusage",
    "times", "clock_gettime", "clock_getres", "gettimeofday", "time", "getrandom",
    "kill", "tgkill", "sched_yield", "sched_getaffinity", "uname", "prctl", "syscall",
    "getcwd", "chdir", "umask", "futex", "pthread_cond_signal", "pthread_cond_broadcast",
})


def _syscall_name(frame: str) -> str:
    """A native frame's function as the C library's documentation names it:
    ``__GI___libc_write (libc.so.6)`` -> ``write``, ``fstatat64 (libc.so.6)`` ->
    ``fstatat``."""
    name = frame.rpartition(" (")[0] or frame
    name = re.sub(r"^_*(?:GI_+)?(?:libc_)?", "", name)
    return re.sub(r"(?:_nocancel|_time64|64)$", "", name)


def python_frames(frames: list[str]) -> list[str]:
    """One sample's frames (py-spy ``--native``, innermost last) as its Python frames,
    ending in ``WAITING_IN_KERNEL`` when its innermost native frames (those below the
    last Python frame) wait, or in ``IN_KERNEL`` when they are a system call's wrapper
    or the vDSO (a clock the vDSO cannot read in user space is a system call made from
    it). Frames without native ones come back as they are."""
    python = [frame for frame in frames if _PYTHON_FRAME.search(frame)]
    last = max((i for i, f in enumerate(frames) if _PYTHON_FRAME.search(f)), default=-1)
    below = frames[last + 1:]
    names = {_syscall_name(frame) for frame in below}
    if names & WAITING_CALLS:
        return [*python, WAITING_IN_KERNEL]
    if names & SYSTEM_CALLS or (below and below[-1].endswith(" ([vdso])")):
        return [*python, IN_KERNEL]
    return python


def label_stacks(raw: str, role: str) -> Counter[str]:
    """py-spy's folded ``--subprocesses`` output with each stack's process frames replaced
    by one frame naming its part: ``<role> master`` (the root process) or ``<role>
    workers`` (any process it forked); its native frames (``--native``) are left out,
    what they said kept as a last frame (``python_frames``)."""
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
        frames = python_frames(stack.split(";")) if stack else []
        stacks[";".join([part, *frames])] += int(count)
    return stacks


@dataclass(frozen=True)
class WindowProfile:
    """The folded stacks of one measured window (or of a run's windows, merged)."""

    stacks: Mapping[str, int]  # folded stack (first frame: the part) -> samples
    masters: tuple[int, ...]  # the pids py-spy began at: the servers' first processes
    problems: tuple[str, ...] = ()  # why part of it is missing (one line each)
    rate_hz: int = RATE_HZ
    # A crowded stack's window is driven at a concurrency of its own (``concurrency``,
    # see HostExecutor._profile): its processes' CPU and its requests, which its samples
    # are then scaled to (not the measured window's). Empty otherwise.
    usage: tuple[ProcessUsage, ...] = ()
    requests: int = 0
    concurrency: int | None = None

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())


def merge_profiles(profiles: list[WindowProfile]) -> WindowProfile | None:
    """A sliced run's windows as one profile (their samples added up). Where some windows
    were sampled again uncrowded (``concurrency``), only those: their samples are scaled
    to their own CPU and requests, which the others' do not match."""
    if not profiles:
        return None
    problems = tuple(dict.fromkeys(problem for p in profiles for problem in p.problems))
    profiles = [p for p in profiles if p.concurrency is not None] or profiles
    stacks: Counter[str] = Counter()
    for profile in profiles:
        stacks.update(profile.stacks)
    return WindowProfile(
        dict(stacks),
        tuple(sorted({pid for p in profiles for pid in p.masters})),
        problems,
        profiles[0].rate_hz,
        # Every window's processes, a process once per window (the runner adds them up
        # per process, as it does the measured windows').
        tuple(u for p in profiles for u in p.usage),
        sum(p.requests for p in profiles),
        next((p.concurrency for p in profiles if p.concurrency is not None), None),
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
                     *(["--native"] if NATIVE else []),
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
