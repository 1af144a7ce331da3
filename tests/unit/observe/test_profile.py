"""py-spy's side of --profile: its output labelled by part, merged over slices, and the
one line said when it cannot profile (a missing py-spy, ptrace not permitted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from servelab.host.profiler import profiler_problem, py_spy
from servelab.observe.profile import (
    IN_KERNEL,
    WAITING_IN_KERNEL,
    StackProfiler,
    WindowProfile,
    label_stacks,
    merge_profiles,
    python_frames,
)

RAW = (
    'process 10:"python -m gunicorn app:app";main (gunicorn/app.py:3);sleep (arbiter.py:9) 4\n'
    'process 10:"python -m gunicorn app:app";process 11:"gunicorn: worker";run (w.py:1) 90\n'
    'process 10:"python -m gunicorn";process 11:"gunicorn: worker";process 12:"x";f (a.py:2) 6\n'
)


def test_process_frames_become_the_part() -> None:
    assert label_stacks(RAW, "app") == {
        "app master;main (gunicorn/app.py:3);sleep (arbiter.py:9)": 4,
        "app workers;run (w.py:1)": 90,
        "app workers;f (a.py:2)": 6,
    }


# py-spy --native's frames, as it wrote them for a loop reading a thread's CPU clock, a
# socket send, a selector woken by its socket, and a thread retaking the GIL.
ROOT = "0x7fdeb23278ec (libc.so.6);thread_run (libpython3.11.so.1.0);main (m.py:3)"
NATIVE = {
    "syscalls (m.py:14);clock_gettime (libc.so.6);0x7fdeb2a83be1 ([vdso])": IN_KERNEL,
    "sender (m.py:17);sock_send (socketmodule.c:4207);sock_call_ex (socketmodule.c:921);"
    "send (libc.so.6)": IN_KERNEL,
    "stat (m.py:9);os_stat (libpython3.11.so.1.0);__GI___fstatat64 (libc.so.6)": IN_KERNEL,
    "EpollSelector.select (selectors.py:468);select_epoll_poll (selectmodule.c.h:841);"
    "epoll_wait (libc.so.6)": WAITING_IN_KERNEL,
    "sender (m.py:17);sock_send (socketmodule.c:4207);sock_call_ex (socketmodule.c:923);"
    "pthread_cond_timedwait (libc.so.6);0x7fdeb22a3f16 (libc.so.6)": WAITING_IN_KERNEL,
    "compute (m.py:7)": None,
    "stat (m.py:9);os_stat (libpython3.11.so.1.0);0x7fdeb2374223 (libc.so.6)": None,
}


@pytest.mark.parametrize(("frames", "last"), NATIVE.items())
def test_native_frames_say_where_the_thread_was(frames: str, last: str | None) -> None:
    python = [f for f in f"{ROOT};{frames}".split(";") if ".py:" in f]
    assert python_frames(f"{ROOT};{frames}".split(";")) == (
        python if last is None else [*python, last]
    )


def test_python_frames_without_native_ones_are_kept() -> None:
    frames = ["<module> (<frozen runpy>:88)", "main (m.py:1)", "f (lib.pyx:3)"]
    assert python_frames(frames) == frames
    assert label_stacks(f'process 10:"x";{ROOT};{list(NATIVE)[1]} 5\n', "app") == {
        f"app master;main (m.py:3);sender (m.py:17);{IN_KERNEL}": 5
    }


def test_slices_merge_into_one_profile() -> None:
    first = WindowProfile({"app workers;f": 3}, (10,))
    second = WindowProfile({"app workers;f": 2, "app master;g": 1}, (10,), ("py-spy failed",))
    merged = merge_profiles([first, second])
    assert merged is not None
    assert merged.stacks == {"app workers;f": 5, "app master;g": 1}
    assert merged.samples == 6 and merged.masters == (10,)
    assert merged.problems == ("py-spy failed",)
    assert merge_profiles([]) is None


def test_a_run_whose_slices_were_partly_sampled_uncrowded_keeps_those_only() -> None:
    """Their samples are scaled to their own CPU and requests: a crowded slice's samples
    at the measured load would be scaled to CPU they did not come from."""
    crowded = WindowProfile({"app workers;f": 30}, (10,), ("py-spy failed",))
    again = WindowProfile({"app workers;f": 3}, (10,), requests=40, concurrency=1)
    merged = merge_profiles([crowded, again, again])
    assert merged is not None
    assert merged.stacks == {"app workers;f": 6} and merged.requests == 80
    assert merged.concurrency == 1
    assert merged.problems == ("py-spy failed",)  # every window's problems still said


def _fake_py_spy(tmp_path: Path, said: str, code: int) -> str:
    script = tmp_path / "py-spy"
    script.write_text(f"#!/bin/sh\necho '{said}' >&2\nexit {code}\n")
    script.chmod(0o755)
    return str(script)


def test_missing_py_spy_is_one_line_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("servelab.host.profiler.py_spy", lambda: None)
    problem = profiler_problem()
    assert problem is not None and "\n" not in problem
    assert problem.startswith("no profiles: py-spy is not installed")
    assert "servelab setup --with test" in problem


def test_ptrace_not_permitted_is_one_line_with_the_fix(tmp_path: Path) -> None:
    said = "Error: Permission Denied: Try running again with elevated permissions"
    problem = profiler_problem(_fake_py_spy(tmp_path, said, 1))
    assert problem is not None and "\n" not in problem
    assert "does not let py-spy read other processes" in problem
    assert "CAP_SYS_PTRACE" in problem


def test_a_py_spy_that_writes_nothing_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with StackProfiler(
            _fake_py_spy(tmp_path, "Error: no python found", 1), {"app": sleeper.pid},
            tmp_path / "work", 1.0,
        ) as profiler:
            pass
    finally:
        sleeper.kill()
        sleeper.wait()
    profile = profiler.profile()
    assert profile.stacks == {}
    assert profile.problems == (f"py-spy wrote no profile of app (pid {sleeper.pid}): "
                                "Error: no python found",)


@pytest.mark.skipif(py_spy() is None, reason="py-spy is not installed (the profile extra)")
def test_py_spy_samples_a_forked_worker(tmp_path: Path) -> None:
    """The real py-spy on a parent that forks a spinning child: the child's function is
    found under "workers"."""
    code = (
        "import os, time\n"
        "def planted_spin():\n"
        "    end = time.process_time() + 0.01\n"
        "    while time.process_time() < end: pass\n"
        "if os.fork() == 0:\n"
        "    while True: planted_spin()\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    script = tmp_path / "forks.py"  # a file: py-spy's process frames quote the command line
    script.write_text(code)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              start_new_session=True)
    try:
        assert parent.stdout is not None
        parent.stdout.readline()
        executable = py_spy()
        assert executable is not None
        with StackProfiler(executable, {"app": parent.pid}, tmp_path / "work", 1.0) as p:
            subprocess.run(["sleep", "1"], check=True)
    finally:
        os.killpg(parent.pid, 9)
        parent.wait()
    stacks = p.profile().stacks
    spun = sum(n for s, n in stacks.items() if s.startswith("app workers;") and "planted_spin" in s)
    assert spun >= 50, stacks  # ~100 samples a second of a busy child
