"""``servelab locust-worker``: Locust workers on a load machine that serve a whole experiment.

A servelab experiment is many runs (warm-ups, repetitions, slices), and every run is a
Locust master of its own that ends by telling its workers to quit ("quit message from
master, shutting down"): a plain ``locust --worker`` then exits, and the next run's
master waits for workers that no longer exist. So the supervisor here starts
``processes`` plain workers (``worker_command``, one process each) and starts each one
again whenever it exits: after every run, a fresh worker connects to the next master.
The master's side helps (``locustfiles/servelab_hooks.py``): a master that is finishing
answers no new worker, so a restarted worker asks again a second later and finds the
next run's master; a master that hears a worker it does not know (one whose master was
killed) tells it to quit, and it restarts and connects.

The user starts it once; Ctrl-C or SIGTERM stops every worker (SIGTERM to its process
group, SIGKILL after a grace period) and reaps it. A worker that keeps failing at once
(exit status other than 0 within ``FAST_EXIT_S`` of its start, ``FAST_FAILURES`` times
in a row) is an error with its last output, not a restart loop.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from servelab.errors import LoadDriverError, SpecError
from servelab.host.procs import JANITOR
from servelab.load.locust import LocustDriver
from servelab.load.locust_options import scenario_path
from servelab.load.locust_output import HOOKS

MACHINE_ENV = "SERVELAB_WORKER_MACHINE"  # read by the hooks (servelab_hooks.py)
FAST_EXIT_S = 10.0
FAST_FAILURES = 3
GRACE_S = 5.0
POLL_S = 0.1
# Exits this close together (or one of every process) are one run's end: one line.
QUIET_S = 0.5
TAIL_LINES = 20
# A worker that found no master for CONNECT_RETRY_COUNT tries (5 minutes, set by the
# hooks) says this and exits: expected between experiments, so started again quietly.
NO_MASTER = "Failed to connect to the Locust master"
NO_MASTER_STATUS = -1000  # stands for that exit in the supervisor's own bookkeeping


@dataclass
class WorkerProcess:
    """One ``locust --worker`` process slot, restarted whenever its process exits."""

    index: int
    popen: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    starts: int = 0
    failures: int = 0  # fast failures in a row
    output: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=TAIL_LINES)
    )
    reader: threading.Thread | None = None


class WorkerSupervisor:
    """Runs ``processes`` copies of ``argv`` until stopped, restarting each on exit.

    ``say`` gets one line per event worth telling (start, each run's end, a failure);
    ``echo`` gets every line the workers print (their own warnings and errors).
    """

    def __init__(
        self,
        argv: Sequence[str],
        processes: int,
        *,
        machine: str | None = None,
        say: Callable[[str], None] = print,
        echo: Callable[[str], None] | None = None,
    ) -> None:
        if processes < 1:
            raise ValueError("processes must be 1 or more")
        self.argv = list(argv)
        self.machine = machine or socket.gethostname()
        self.slots = [WorkerProcess(i + 1) for i in range(processes)]
        self.say = say
        self.echo = echo
        self.runs_served = 0  # masters that quit the workers (each run's end)
        self.first_start = 0.0
        self._stopping = threading.Event()

    # -- one process ---------------------------------------------------------------------
    def _start(self, slot: WorkerProcess) -> None:
        env = {**os.environ, MACHINE_ENV: self.machine}
        slot.popen = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True, env=env,
        )  # fmt: skip
        JANITOR.watch("group", slot.popen.pid)
        slot.started = time.monotonic()
        slot.starts += 1
        slot.output.clear()
        slot.reader = threading.Thread(
            target=self._read, args=(slot, slot.popen), name=f"locust-worker-{slot.index}",
            daemon=True,
        )
        slot.reader.start()

    def _read(self, slot: WorkerProcess, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stdout is not None
        for raw in popen.stdout:
            line = raw.decode(errors="replace").rstrip()
            slot.output.append(line)
            if self.echo is not None and line and not self._no_master(slot):
                self.echo(f"worker {slot.index}: {line}")

    @staticmethod
    def _no_master(slot: WorkerProcess) -> bool:
        return any(NO_MASTER in line for line in slot.output)

    def _reap(self, slot: WorkerProcess) -> int:
        """The exit status of the slot's process, which has exited; its group gone."""
        assert slot.popen is not None
        status = slot.popen.wait()
        _kill_group(slot.popen.pid)
        JANITOR.forget("group", slot.popen.pid)
        if slot.reader is not None:
            slot.reader.join(2.0)
        return status

    def _stop(self, slot: WorkerProcess) -> None:
        """SIGTERM the slot's group (Locust's worker then tells its master it quits),
        SIGKILL after the grace period, reap."""
        popen = slot.popen
        if popen is None:
            return
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(popen.pid, signal.SIGTERM)
            try:
                popen.wait(GRACE_S)
            except subprocess.TimeoutExpired:
                _kill_group(popen.pid)
                popen.wait()
        self._reap(slot)
        slot.popen = None

    # -- the whole ------------------------------------------------------------------------
    def run(self, until: Callable[[], bool] | None = None) -> None:
        """Supervise until ``until()`` says so, Ctrl-C or SIGTERM (KeyboardInterrupt,
        re-raised once every worker is stopped), or a worker that keeps failing at once
        (LoadDriverError)."""
        with JANITOR.running():
            try:
                self.first_start = time.monotonic()
                for slot in self.slots:
                    self._start(slot)
                self._watch(until or (lambda: False))
            finally:
                self._stopping.set()
                for slot in self.slots:
                    with contextlib.suppress(KeyboardInterrupt):
                        self._stop(slot)

    def _watch(self, until: Callable[[], bool]) -> None:
        ended: list[tuple[int, int, str]] = []  # exits not told yet: slot, status, last line
        last_exit = 0.0
        while not until():
            time.sleep(POLL_S)
            now = time.monotonic()
            for slot in self.slots:
                if slot.popen is None or slot.popen.poll() is None:
                    continue
                lived = now - slot.started
                status = self._reap(slot)
                if self._no_master(slot):
                    status = 0 if status == 0 else NO_MASTER_STATUS
                if status != 0 and lived < FAST_EXIT_S:
                    slot.failures += 1
                    if slot.failures >= FAST_FAILURES:
                        raise self._failing(slot, status)
                else:
                    slot.failures = 0
                last = next((line for line in reversed(slot.output) if line), "no output")
                ended.append((slot.index, status, last))
                last_exit = now
                self._start(slot)
            if ended and (now - last_exit >= QUIET_S or len(ended) >= len(self.slots)):
                self._tell(ended)
                ended = []

    def _tell(self, ended: list[tuple[int, int, str]]) -> None:
        quit_by_master = [index for index, status, _ in ended if status == 0]
        if quit_by_master:
            self.runs_served += 1
            self.say(
                f"servelab: the master ended run {self.runs_served}: "
                f"{len(quit_by_master)} worker process(es) restarted for the next run"
            )
        if any(status == NO_MASTER_STATUS for _, status, _ in ended):
            self.say("servelab: no master for 5 minutes; the workers started again and wait")
        for index, status, last in ended:
            if status not in (0, NO_MASTER_STATUS):
                self.say(
                    f"servelab: worker {index} exited with status {status} ({last}); restarted"
                )

    def _failing(self, slot: WorkerProcess, status: int) -> LoadDriverError:
        return LoadDriverError(
            f"locust --worker exits at once (status {status}, {FAST_FAILURES} times in a "
            f"row): {' '.join(self.argv)}",
            "check the locustfile and the Locust version (the same as the master's); its "
            "output is below",
            detail="\n".join(slot.output),
        )


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def worker_command(
    master_host: str,
    master_port: int,
    locustfile: str | None,
    processes: int = 1,
    loglevel: str | None = None,
) -> list[str]:
    """A plain Locust worker (``servelab locust-worker`` supervises ``processes`` of them,
    one process each), with servelab's hooks loaded beside the scenario (needed for the
    open model's pacing on other machines and for the master's report by machine) and
    the same built-in scenarios by name. The master sends the host, users and servelab's
    options."""
    driver = LocustDriver(options={"locustfile": locustfile} if locustfile else None)
    path = driver._file()
    if not driver.options.scenario and not Path(path).is_file():
        raise SpecError(f"locustfile {path} does not exist", "pass the master's --locustfile")
    argv = [
        driver.executable(), "--worker", "--master-host", master_host,
        "--master-port", str(master_port), "-f", f"{path},{scenario_path(HOOKS)}",
    ]  # fmt: skip
    if loglevel:
        argv += ["--loglevel", loglevel]
    if processes > 1:
        argv += ["--processes", str(processes)]
    return argv


def check_worker_locustfile(locustfile: str | None) -> None:
    """Before workers start: the user's locustfile imports and has a User class (the
    one-line SpecError of ``locust --list`` otherwise; built-in scenarios need nothing)."""
    driver = LocustDriver(options={"locustfile": locustfile} if locustfile else None)
    if not driver.options.scenario:
        driver.user_classes()
