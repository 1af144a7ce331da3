"""The protocol every load driver implements, and the one function that runs them.

A driver only knows its own command line and output format; ``run_load``
does the rest the same way for all: bounds the run in time, pins the driver
to its CPUs, measures the driver's own CPU time and memory (``wait4``), and
turns a failure into a ``LoadDriverError`` carrying the driver's output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from servelab.config.load import LoadSpec, RequestSpec
from servelab.errors import LoadDriverError, SpecError
from servelab.host.doctor import Check
from servelab.host.procs import JANITOR, OWNER_ENV, tail, with_cpus
from servelab.registry import DRIVERS, most_capable
from servelab.results.records import LoadMeasurement

if TYPE_CHECKING:
    import resource

# Extra seconds a driver gets beyond its own time limit before it is killed.
KILL_MARGIN_S = 30.0
# Time a driver gets to print its version or help.
VERSION_TIMEOUT_S = 10.0
# How often a running driver's stderr is read when it has something to say (``watch``).
WATCH_S = 0.2


def program_output(argv: list[str], what: str, tool: str) -> str:
    """stdout + stderr of a short informational command (``oha --help``, ``ab -V``)."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LoadDriverError(
            f"could not run {what} ({exc})", f"check the {tool} installation (servelab doctor)"
        ) from None
    return done.stdout + done.stderr


# What a driver may be able to do; each lists those it can in ``capabilities``.
CAPABILITIES = {
    "request_count": "stop after a number of requests",
    "open_model": "send at a fixed rate (open model)",
    "bursts": "send bursts of requests with pauses between (bursts model)",
    "replay": "send an access log's requests at their logged times (replay model)",
    "slow_ms": "count requests slower than a threshold",
    "request_mix": "draw each request's path from a weighted mix",
    "latencies": "keep every request's latency (runs measured in slices need it)",
    "time_per_request": "print ab's 'Time per request' figures",
}


def kind_of(message: str, kinds: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The first kind whose substrings (lower case) ``message`` contains; else "other".
    Each driver sorts its failure messages with its own table (e.g. oha's ERROR_KINDS)."""
    lowered = message.lower()
    for kind, needles in kinds:
        if any(needle in lowered for needle in needles):
            return kind
    return "other"


def needed_capabilities(request: RequestSpec, load: LoadSpec) -> set[str]:
    """The capabilities ``request`` and ``load`` need of a driver."""
    needed = set()
    if load.duration_s is None and load.model != "replay":  # a replay: its schedule's
        needed.add("request_count")
    if load.model == "open":
        needed.add("open_model")
    if load.model == "bursts":
        needed.add("bursts")
    if load.model == "replay":
        needed.add("replay")
    if load.slow_ms is not None:
        needed.add("slow_ms")
    if request.mix:
        needed.add("request_mix")
    return needed


@dataclass(frozen=True)
class Answer:
    """One answered request as the driver recorded it, on its own clock (seconds from
    its start): what switched passes count (servelab.measuring.switching)."""

    start: float
    end: float
    status: int
    size: int


class LoadDriver(ABC):
    """One load generator: its command line and output format, and what it can do."""

    name: ClassVar[str]
    capabilities: ClassVar[frozenset[str]] = frozenset()  # of CAPABILITIES
    # The driver's own settings (an experiment's ``driver_options``), validated by this
    # model and handed to ``__init__(options=...)``; None: it takes none.
    options_model: ClassVar[type[Any] | None] = None
    # Set by the runner for runs measured in slices (needs the "latencies" capability).
    keep_latencies: bool = False

    @abstractmethod
    def executable(self) -> str:
        """Path of the program; raises MissingToolError with the install fix."""

    @abstractmethod
    def version(self) -> str: ...

    @abstractmethod
    def doctor_checks(self) -> list[Check]:
        """Is it installed (and how to install it)?"""

    @classmethod
    def with_options(cls, options: Mapping[str, Any]) -> LoadDriver:
        """A new driver with its own settings (``options_model``'s); a driver that takes
        some overrides this."""
        raise TypeError(f"load driver {cls.name} takes no options")

    def unsupported(self, request: RequestSpec, load: LoadSpec) -> str | None:
        """Why this driver cannot generate ``load``, beyond a missing capability (None
        when it can)."""
        return None

    @abstractmethod
    def command(
        self, url: str, request: RequestSpec, load: LoadSpec, body_path: Path | None, workdir: Path
    ) -> list[str]:
        """The full argv, starting with ``self.executable()``."""

    @abstractmethod
    def parse(self, stdout: str, stderr: str, load: LoadSpec) -> LoadMeasurement:
        """Read the driver's output; driver_cpu_s / peak RSS are filled in by run_load."""

    def prepare(self, side_by_side: bool = False) -> None:  # noqa: B027 (optional hook)
        """Checks of the driver's own input before anything starts (SpecError)."""

    def startup_allowance_s(self) -> float:
        """Seconds a run may take beyond its load's duration before it is killed."""
        return KILL_MARGIN_S

    def explain_failure(self, status: int, stdout: str, stderr: str) -> Exception | None:
        """A clearer error than "failed with exit status N", when the output says why."""
        return None

    def extra_measurements(self, workdir: Path, load: LoadSpec) -> dict[str, Any]:
        """Fields of the measurement read from files the run left in ``workdir``."""
        return {}

    def latencies_ms(self, workdir: Path) -> Sequence[float]:
        """Every answered request's latency of the last run (with ``keep_latencies``)."""
        return ()

    # Whether a run may be stopped (SIGSTOP) and resumed while it goes, its answers then
    # read per request with ``answers`` (with ``keep_latencies``): switched passes.
    switchable: ClassVar[bool] = False

    def answers(self, workdir: Path) -> list[Answer]:
        """Every answered request of the last run, in the order answered (with
        ``keep_latencies``; only a ``switchable`` driver has them)."""
        raise NotImplementedError(f"load driver {self.name} keeps no per-request answers")

    @property
    def watches(self) -> bool:
        """Whether ``watch`` may have something to say while a run goes (its stderr is
        read every ``WATCH_S`` only then)."""
        return False

    def watch(self, stderr: str) -> str | None:
        """What the user should hear while the run goes, from its stderr so far (Locust:
        its workers on other machines, once its load starts); None: nothing."""
        return None


def check_driver_can(
    driver: LoadDriver, request: RequestSpec, load: LoadSpec, workload: str | None = None
) -> None:
    """SpecError unless ``driver`` can send ``request`` as ``load`` (checked before any
    stack starts, and again before each run)."""
    missing = needed_capabilities(request, load) - driver.capabilities
    reason = driver.unsupported(request, load) or (
        f"it has no {' / '.join(sorted(missing))} support" if missing else None
    )
    if reason:
        where = f" (workload {workload!r})" if workload else ""
        raise SpecError(
            f"load driver {driver.name} cannot do this{where}: {reason}",
            f"choose another driver with --driver ({most_capable()} supports the most)",
        )


def run_load(
    driver: LoadDriver,
    url: str,
    request: RequestSpec,
    load: LoadSpec,
    workdir: Path,
    *,
    cpus: str | None = None,
    prefix: Sequence[str] = (),
    on_note: Callable[[str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> LoadMeasurement:
    """Run ``driver`` once against ``url`` and return what it measured.

    ``prefix`` goes before the driver's argv, e.g. ``ip netns exec NAME`` to run it
    inside the stack's network namespace. ``on_note`` hears what the driver says while it
    runs (``LoadDriver.watch``), once per change. ``on_start`` is told the pid of the
    driver's process (its process group's too) as soon as it exists.
    """
    check_driver_can(driver, request, load)
    workdir.mkdir(parents=True, exist_ok=True)
    body_path = None
    if request.body is not None:
        body_path = workdir / "body"
        body_path.write_text(request.body)
    argv = with_cpus([*prefix, *driver.command(url, request, load, body_path, workdir)], cpus)
    out_path, err_path = workdir / f"{driver.name}.out", workdir / f"{driver.name}.err"
    margin = driver.startup_allowance_s()
    limit = min((load.duration_s or load.max_time_s) + margin, load.max_time_s + margin)
    # Marked as servelab's, like the stack's servers (servelab.launch.launched_by).
    env = {**os.environ, OWNER_ENV: str(os.getpid())}
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
            env=env,
        )
    JANITOR.watch("group", popen.pid)
    poll = None
    if on_note is not None and driver.watches:
        poll = _watcher(driver, err_path, on_note)
    try:
        if on_start is not None:
            on_start(popen.pid)
        status, rusage, peak_rss = _wait_bounded(popen, limit, poll)
    finally:
        # Whatever the driver started in its group and left behind (a worker process
        # that outlived its parent) goes with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        JANITOR.forget("group", popen.pid)
    stdout, stderr = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
    if status is None:
        raise LoadDriverError(
            f"{driver.name} did not finish within {limit:.0f} s and was killed",
            "lower the request count or duration, or raise max_time_s",
            detail=tail(err_path),
        )
    if status != 0:
        explained = driver.explain_failure(status, stdout, stderr)
        if explained is not None:
            raise explained
        raise LoadDriverError(
            f"{driver.name} failed with exit status {status}",
            "see the driver's output below; check the URL and the request",
            detail=(stderr or stdout)[-2000:],
        )
    try:
        measured = driver.parse(stdout, stderr, load)
    except (ValueError, KeyError, IndexError) as exc:
        raise LoadDriverError(
            f"could not read {driver.name}'s output ({exc})",
            f"check that {driver.name}'s version is supported (servelab doctor)",
            detail=stdout[-2000:],
        ) from None
    return measured.model_copy(
        update={
            **driver.extra_measurements(workdir, load),  # e.g. oha's slow-request count
            "driver_cpu_s": rusage.ru_utime + rusage.ru_stime,
            # ru_maxrss would also count servelab's own memory: Linux carries the
            # high-water mark over from the forked parent across exec.
            "driver_peak_rss_bytes": peak_rss if peak_rss is not None else rusage.ru_maxrss * 1024,
        }
    )


def _watcher(
    driver: LoadDriver, err_path: Path, on_note: Callable[[str], None]
) -> Callable[[], None]:
    """What ``_wait_bounded`` calls every ``WATCH_S``: the driver's ``watch`` of its stderr
    so far, handed to ``on_note`` when it says something new."""
    said: list[str] = []

    def poll() -> None:
        try:
            text = err_path.read_text(errors="replace")
        except OSError:
            return
        note = driver.watch(text)
        if note is not None and note not in said:
            said.append(note)
            on_note(note)

    return poll


def _wait_bounded(
    popen: subprocess.Popen[bytes], limit_s: float, poll: Callable[[], None] | None = None
) -> tuple[int | None, resource.struct_rusage, int | None]:
    """Reap ``popen`` with its resource usage; kill its group after ``limit_s``; call
    ``poll`` every ``WATCH_S`` while it runs.

    Returns (exit status or None if it had to be killed, rusage, peak RSS in
    bytes of the program as exec'd, sampled from /proc while it runs; None
    where /proc is missing).
    """
    deadline = time.monotonic() + limit_s
    killed = False
    peak_rss = None
    next_poll = time.monotonic()
    try:
        while True:
            pid, wait_status, rusage = os.wait4(popen.pid, os.WNOHANG)
            if pid:
                break
            peak_rss = _high_water_rss(popen.pid) or peak_rss
            if poll is not None and time.monotonic() >= next_poll:
                poll()
                next_poll = time.monotonic() + WATCH_S
            if time.monotonic() > deadline and not killed:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(popen.pid, signal.SIGKILL)
                killed = True
            time.sleep(0.01)
    except BaseException:
        # Ctrl-C or another error: the driver must not outlive us.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.wait4(popen.pid, 0)
        popen.returncode = -9
        raise
    code = os.waitstatus_to_exitcode(wait_status)
    popen.returncode = code
    return (None if killed else code), rusage, peak_rss


def _high_water_rss(pid: int) -> int | None:
    """VmHWM of ``pid`` in bytes: its peak RSS since its last exec (None if unreadable)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def get_driver(name: str, options: Mapping[str, Any] | None = None) -> LoadDriver:
    """A new driver of ``name`` (drivers keep state) with its own ``options`` (an
    experiment's ``driver_options``, checked there); SpecError naming the choices for an
    unknown one."""
    cls = driver_class(name)
    return cls.with_options(options) if options else cls()


def driver_class(name: str) -> type[LoadDriver]:
    """The driver class of ``name``, checked to be one (SpecError for an unknown name)."""
    cls = DRIVERS.cls(name)
    if not issubclass(cls, LoadDriver):
        raise TypeError(f"{DRIVERS.entries[name]} is not a LoadDriver")
    return cls
