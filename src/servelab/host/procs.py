"""Start, watch and stop the external processes of a run (servers, load drivers).

Each server runs in its own session (process group) so that it and every
worker it forks can be stopped together: SIGTERM to the group, SIGKILL after a
grace period, then reaped. Nothing is left running, also on Ctrl-C, because
callers hold processes in context managers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

# Set in every server's environment to the pid of the process that launched it,
# so tests (and people) can tell which processes belong to whom.
OWNER_ENV = "SERVELAB_OWNER_PID"

# Called with each process's name and command line before it starts (``servelab -v``);
# None: silent.
announce_start: Callable[[str, Sequence[str]], None] | None = None


class Janitor:
    """servelab's side of the janitor process (see ``servelab.host.janitor``).

    Inactive until ``running()`` is entered; then every process group, temp
    dir and namespace registered here is cleaned up even if servelab is killed.
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def running(self) -> Iterator[Janitor]:
        if self._proc is not None:  # already active (nested use)
            yield self
            return
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "servelab.host.janitor"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            yield self
        finally:
            proc, self._proc = self._proc, None
            if proc.stdin:
                proc.stdin.close()
            proc.wait()

    def _send(self, line: str) -> None:
        with self._lock:
            if self._proc is None or self._proc.stdin is None:
                return
            with contextlib.suppress(BrokenPipeError):
                self._proc.stdin.write(line.encode() + b"\n")
                self._proc.stdin.flush()

    def watch(self, kind: str, value: object) -> None:
        """kind: 'group' (a pgid), 'path' (a directory) or 'netns' (a namespace name)."""
        self._send(f"+{kind} {value}")

    def forget(self, kind: str, value: object) -> None:
        self._send(f"-{kind} {value}")


JANITOR = Janitor()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the kernel says is free right now on ``host``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a text file ('' if it does not exist)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def with_cpus(argv: Sequence[str], cpus: str | None) -> list[str]:
    """Prefix ``argv`` with taskset so the program (and all it forks) runs on ``cpus``."""
    if not cpus:
        return list(argv)
    return ["taskset", "--cpu-list", cpus, *argv]


class ManagedProcess:
    """One external program in its own process group, logging to a file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_path: Path,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        cpus: str | None = None,
    ) -> None:
        self.name = name
        self.argv = with_cpus(argv, cpus)
        self.log_path = log_path
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        if self._popen is None:
            raise RuntimeError(f"{self.name} was not started")
        return self._popen.pid

    def start(self) -> ManagedProcess:
        if announce_start is not None:
            announce_start(self.name, self.argv)
        with open(self.log_path, "ab") as log:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
            )
        JANITOR.watch("group", self._popen.pid)
        return self

    def exit_code(self) -> int | None:
        """None while running, else the exit status."""
        return None if self._popen is None else self._popen.poll()

    def log_tail(self, lines: int = 20) -> str:
        return tail(self.log_path, lines)

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the whole group, SIGKILL after ``grace_s``, reap. Safe to call twice."""
        popen = self._popen
        if popen is None:
            return
        if popen.poll() is None:
            _signal_group(popen.pid, signal.SIGTERM)
            try:
                popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(popen.pid, signal.SIGKILL)
                popen.wait()
        # Workers that outlived their master (or ignored SIGTERM) go too.
        _signal_group(popen.pid, signal.SIGKILL)
        _wait_group_gone(popen.pid, timeout_s=grace_s)
        JANITOR.forget("group", popen.pid)

    def __enter__(self) -> ManagedProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    """Wait until no process of group ``pgid`` remains (orphans are reaped by init)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not group_members(pgid):
            return
        time.sleep(0.02)


def group_members(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes whose process group is ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name (which may contain spaces or parens).
        fields = stat.rsplit(")", 1)[1].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            members.append(int(entry.name))
    return members
