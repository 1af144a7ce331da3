"""servelab locust-worker's supervisor, with stand-in workers (small Python programs, not
Locust): every worker that exits is started again, one that keeps failing at once is one
error with its output, and stopping leaves no process."""

from __future__ import annotations

import os
import sys

import psutil
import pytest

from servelab.errors import LoadDriverError
from servelab.load.locust_worker import MACHINE_ENV, WorkerSupervisor


def program(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def alive(pids: set[int]) -> set[int]:
    return {
        pid for pid in pids
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    }


def test_workers_quit_by_each_master_start_again_for_the_next_run(tmp_path):
    # A worker "served a run" and was quit by its master: exit status 0 after a while.
    out = tmp_path / "machine"
    code = f"import os, time; open({str(out)!r}, 'a').write(os.environ[{MACHINE_ENV!r}] + " \
        "'\\n'); time.sleep(0.3)"
    said: list[str] = []
    pids: set[int] = set()
    supervisor = WorkerSupervisor(program(code), 2, machine="load-a", say=said.append)

    def until() -> bool:
        pids.update(slot.popen.pid for slot in supervisor.slots if slot.popen is not None)
        return supervisor.runs_served >= 2

    supervisor.run(until)
    assert all(slot.starts >= 3 for slot in supervisor.slots)
    assert said[0] == "servelab: the master ended run 1: 2 worker process(es) restarted for " \
        "the next run"
    assert set(out.read_text().split()) == {"load-a"}
    assert alive(pids) == set()


def test_a_worker_that_keeps_failing_at_once_is_one_error_with_its_output():
    supervisor = WorkerSupervisor(
        program("import sys; print('no locustfile here'); sys.exit(3)"), 1, say=lambda _: None
    )
    with pytest.raises(LoadDriverError, match=r"exits at once \(status 3, 3 times") as info:
        supervisor.run()
    assert "no locustfile here" in info.value.detail
    assert supervisor.slots[0].starts == 3


def test_a_failure_after_serving_is_told_and_restarted():
    said: list[str] = []
    supervisor = WorkerSupervisor(
        program("import sys; print('lost the master'); sys.exit(1)"), 1, say=said.append
    )
    import servelab.load.locust_worker as module

    fast, module.FAST_EXIT_S = module.FAST_EXIT_S, 0.0  # every exit counts as after serving
    try:
        supervisor.run(lambda: supervisor.slots[0].starts >= 3 and len(said) >= 2)
    finally:
        module.FAST_EXIT_S = fast
    assert said[0] == "servelab: worker 1 exited with status 1 (lost the master); restarted"


def test_ctrl_c_stops_and_reaps_every_worker():
    pids: set[int] = set()
    supervisor = WorkerSupervisor(program("import time; time.sleep(60)"), 3, say=lambda _: None)

    def until() -> bool:
        pids.update(slot.popen.pid for slot in supervisor.slots if slot.popen is not None)
        if len(pids) == 3:
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        supervisor.run(until)
    assert alive(pids) == set()
    assert all(slot.popen is None for slot in supervisor.slots)
    assert os.getpid() not in pids
