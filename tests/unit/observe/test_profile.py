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
    StackProfiler,
    WindowProfile,
    label_stacks,
    merge_profiles,
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


def test_slices_merge_into_one_profile() -> None:
    first = WindowProfile({"app workers;f": 3}, (10,))
    second = WindowProfile({"app workers;f": 2, "app master;g": 1}, (10,), ("py-spy failed",))
    merged = merge_profiles([first, second])
    assert merged is not None
    assert merged.stacks == {"app workers;f": 5, "app master;g": 1}
    assert merged.samples == 6 and merged.masters == (10,)
    assert merged.problems == ("py-spy failed",)
    assert merge_profiles([]) is None


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
    assert "pip install 'servelab[profile]'" in problem


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
