"""Shared pytest helpers: prove stacks leave nothing behind (servelab is installed in the
venv, editable, by scripts/setup.sh)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

# The output's width is the tests' own, not the terminal's: pytest-xdist hands its workers
# COLUMNS (the terminal's width), which servelab honours for output that is piped; without
# it, piped output is 160 columns wide, as the tests expect. Before servelab is imported.
os.environ.pop("COLUMNS", None)

from servelab.host.procs import ManagedProcess, group_members
from servelab.host.running import RunningStack
from servelab.launch import OWNER_ENV

GONE_WITHIN_S = 3.0


def stack_processes(
    sessions: set[int], ignore: frozenset[int] = frozenset()
) -> list[psutil.Process]:
    """Live processes in one of ``sessions``, or marked as launched by this pytest.

    Every ManagedProcess runs in its own session, and every process a server
    forks (workers, uvicorn's spawned workers, multiprocessing helpers) stays
    in it. The environment marker catches a process that left its session.
    Processes of other people's runs (e.g. a parallel test session) match
    neither; pids in ``ignore`` (alive before the test began) are skipped.
    """
    me = str(os.getpid())
    found = []
    for proc in psutil.process_iter(["status"]):
        if proc.pid in ignore or proc.pid == os.getpid():
            continue
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if os.getsid(proc.pid) in sessions or proc.environ().get(OWNER_ENV) == me:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _wait_gone(
    sessions: set[int], timeout_s: float, ignore: frozenset[int] = frozenset()
) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = stack_processes(sessions, ignore)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _describe(procs: list[psutil.Process]) -> str:
    lines = []
    for proc in procs:
        try:
            lines.append(f"pid {proc.pid}: {' '.join(proc.cmdline()) or proc.name()}")
        except psutil.Error:
            lines.append(f"pid {proc.pid}: (gone)")
    return "\n".join(lines)


@pytest.fixture(autouse=True)
def no_leftover_processes(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[set[int]]:
    """For integration tests: fail if a process started by the test outlives it.

    Records the session of every ManagedProcess the test starts; afterwards,
    none of their members may remain (they are killed, by pid, if they do).
    """
    sessions: set[int] = set()
    if request.node.get_closest_marker("integration") is None:
        yield sessions
        return
    # Processes of wider-scoped fixtures, already running, are not this test's.
    already = frozenset(proc.pid for proc in stack_processes(set()))
    original_start = ManagedProcess.start

    def recording_start(self: ManagedProcess) -> ManagedProcess:
        started = original_start(self)
        sessions.add(self.pid)
        return started

    monkeypatch.setattr(ManagedProcess, "start", recording_start)
    yield sessions
    leftovers = _wait_gone(sessions, GONE_WITHIN_S, already)
    if leftovers:
        description = _describe(leftovers)
        for proc in leftovers:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
        pytest.fail(f"processes left running after the test:\n{description}")


# make test runs the integration tests two at a time (pytest-xdist, --dist loadscope: the
# tests of one module, or of one group below, run one after the other on one worker).
# Groups by nodeid prefix, not by xdist_group marks: under pytest 9, xdist 3.8's loadgroup
# loses the marks' nodeid suffix and splits a group over both workers.
SERIAL_GROUPS: dict[str, tuple[str, ...]] = {
    # They assert a measured effect (a slowdown found, a capacity held, identical
    # versions not called slower): never two at once. (The documented CI check beside
    # test_check's, two stacks each switched every 0.5 s on CPU 0, called its identical
    # versions -13.5 % [-18.2, -8.5] in CI.) A test that needs the machine to itself is
    # marked "alone" instead.
    "measuring": tuple(f"tests/integration/test_{name}" for name in (
        "capacity.py", "check.py", "tune.py", "switching.py", "action.py", "replay.py",
        "profile.py::test_the_", "profile.py::test_a_planted",
    )),
    # They assert ten-fold slowdowns, found beside one measuring test as well: the two
    # bisects, one after the other, at the same time as the group above.
    "bisecting": ("tests/integration/test_bisect.py", "tests/integration/test_bisect_locks.py"),
    # They look for any PostgreSQL or toxiproxy process, not only their own.
    "postgres": ("tests/integration/test_slow_database.py",
                 "tests/integration/test_django_postgres.py"),
    # They look for any Locust process, not only their own.
    # (The remote capacity test too: it measured beside test_locust in CI, whose tests
    # then saw its Locust master and worker.)
    "locust": tuple(f"tests/integration/test_{name}.py"
                    for name in ("locust", "locust_remote", "load_drivers", "capacity_remote")),
}


def serial_group(nodeid: str) -> str | None:
    """The group of SERIAL_GROUPS a test belongs to, if any."""
    return next((group for group, prefixes in SERIAL_GROUPS.items()
                 if nodeid.startswith(prefixes)), None)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """--dist loadscope, with SERIAL_GROUPS as scopes of their own."""
    if config.getoption("dist", None) != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupedScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return serial_group(nodeid) or super()._split_scope(nodeid)

    return GroupedScheduling(config, log)


@pytest.fixture(autouse=True)
def private_temp_dir(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Path | None]:
    """For integration tests: a temp dir of the test's own (TMPDIR, for servelab run in
    this process and in subprocesses), so that "no servelab temp dir left" means this
    test's, though the suite runs two tests at a time (make test: pytest-xdist). Fails
    if a servelab-* dir is left in it.

    Traversable by every user (0711), as /tmp is: Apache's and mod_wsgi's www-data
    daemons reach the sockets and files of the stack dirs in it."""
    if request.node.get_closest_marker("integration") is None:
        yield None
        return
    # pytest's own base temp dir (tmp_path's), fixed before TMPDIR changes: made lazily,
    # it would be made in this test's private dir and removed with it.
    tmp_path_factory.getbasetemp()
    # Short, under /tmp: a unix socket's path in a stack dir inside stays within 108 bytes.
    private = Path(tempfile.mkdtemp(prefix="sl-", dir="/tmp"))
    private.chmod(0o711)
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    try:
        yield private
        left = sorted(p.name for p in private.glob("servelab-*") if p.is_dir())
        assert not left, f"servelab temp dirs left after the test: {left}"
    finally:
        shutil.rmtree(private, ignore_errors=True)


@pytest.fixture
def assert_stack_gone() -> Callable[[RunningStack], None]:
    """A check to call after a ``launch_stack`` block: no process, group or temp dir left."""

    def check(stack: RunningStack) -> None:
        assert not stack.workdir.exists(), f"temp dir {stack.workdir} was not removed"
        for role, proc in stack.processes.items():
            assert proc.exit_code() is not None, f"{role} (pid {proc.pid}) is still running"
            assert not group_members(proc.pid), f"{role}'s process group {proc.pid} has members"
        left = _wait_gone({proc.pid for proc in stack.processes.values()}, GONE_WITHIN_S)
        assert not left, f"stack processes still alive:\n{_describe(left)}"

    return check



@pytest.fixture
def without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the "charts" extra were not installed: importing matplotlib fails (and the
    drawing modules, if already imported, are imported again and fail too)."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    for name in ("servelab.report.charts", "servelab.report.drawing"):
        monkeypatch.delitem(sys.modules, name, raising=False)
