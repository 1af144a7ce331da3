"""CPU time and peak memory of every process of a stack over a measured window.

A background thread walks each server's process tree a few times a second so
that workers forked or recycled during the run are counted too. CPU time is
the difference between the last and the first reading of each process; peak
RSS is the kernel's high-water mark (VmHWM), which no sampling can miss.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import psutil

from servelab.plugins.front import get_front
from servelab.registry import PROCESS_FRONTS
from servelab.results.records import ProcessUsage


@dataclass
class _Seen:
    role: str
    name: str
    cpu_first: float
    cpu_last: float
    peak_rss: int
    system_first: float = 0.0
    system_last: float = 0.0


def _peak_rss_bytes(proc: psutil.Process) -> int:
    try:
        with open(f"/proc/{proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _role(root_role: str, proc: psutil.Process) -> str:
    """The role of a process in the tree of ``root_role``: a front's processes that run
    the app itself (mod_wsgi's daemons, which Apache renames ``(wsgi:GROUP)``) are "app"."""
    if root_role not in PROCESS_FRONTS:
        return root_role
    prefix = get_front(root_role).app_process_prefix
    if prefix is None:
        return root_role
    try:
        argv0 = proc.cmdline()[:1]
    except psutil.Error:
        return root_role
    return "app" if argv0 and argv0[0].startswith(prefix) else root_role


class ProcessSampler:
    """Use as ``with ProcessSampler({"app": pid, "nginx": pid}) as s: ...; s.usage()``."""

    def __init__(self, roots: dict[str, int], interval_s: float = 0.2) -> None:
        self.roots = roots
        self.interval_s = interval_s
        self._seen: dict[int, _Seen] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="servelab-sampler", daemon=True)
        self._at_start = True

    def _tree(self) -> list[tuple[str, psutil.Process]]:
        procs = []
        for role, pid in self.roots.items():
            try:
                root = psutil.Process(pid)
                procs.append((role, root))
                procs.extend((role, child) for child in root.children(recursive=True))
            except psutil.NoSuchProcess:
                continue
        return procs

    def sample(self) -> None:
        for role, proc in self._tree():
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    cpu = times.user + times.system
                    name = proc.name()
            except psutil.Error:
                continue
            seen = self._seen.get(proc.pid)
            if seen is None:
                # A process born during the window counts from its birth.
                first = cpu if self._at_start else 0.0
                system = times.system if self._at_start else 0.0
                seen = self._seen[proc.pid] = _Seen(
                    _role(role, proc), name, first, cpu, 0, system, times.system
                )
            seen.cpu_last = cpu
            seen.system_last = times.system
            seen.peak_rss = max(seen.peak_rss, _peak_rss_bytes(proc))
        self._at_start = False

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> ProcessSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def usage(self) -> tuple[ProcessUsage, ...]:
        return tuple(
            ProcessUsage(
                role=s.role,
                pid=pid,
                name=s.name,
                cpu_s=round(s.cpu_last - s.cpu_first, 4),
                peak_rss_bytes=s.peak_rss,
                system_s=round(s.system_last - s.system_first, 4),
            )
            for pid, s in sorted(self._seen.items())
        )
