"""Can this machine profile the stack (``--profile``)? py-spy installed, and allowed to read
other processes' memory (ptrace: containers often forbid it). One line with the fix when
not; ``servelab doctor`` asks the same (``servelab.observe.profile`` does the sampling)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

INSTALL_FIX = "servelab setup --with test (it installs py-spy)"
PTRACE_FIX = (
    "run servelab as root, or give its container CAP_SYS_PTRACE (docker run --cap-add "
    "SYS_PTRACE), or allow it with sysctl kernel.yama.ptrace_scope=0"
)


def py_spy() -> str | None:
    """py-spy's path: on PATH, or beside this Python (a venv's bin not on PATH)."""
    beside = Path(sys.executable).with_name("py-spy")
    return shutil.which("py-spy") or (str(beside) if os.access(beside, os.X_OK) else None)


def profiler_problem(executable: str | None = None) -> str | None:
    """None when py-spy can sample a Python process of this machine; else one line saying
    what is missing and the fix (``--profile`` then measures without profiles)."""
    executable = executable or py_spy()
    if executable is None:
        return f"no profiles: py-spy is not installed (fix: {INSTALL_FIX})"
    probe = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; print('ready', flush=True); time.sleep(30)"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        assert probe.stdout is not None
        probe.stdout.readline()  # its interpreter is up
        try:
            done = subprocess.run(
                [executable, "dump", "--pid", str(probe.pid)],
                capture_output=True, text=True, timeout=20, check=False,
            )
        except OSError as exc:
            return f"no profiles: py-spy cannot run ({exc.strerror}) (fix: {INSTALL_FIX})"
        except subprocess.TimeoutExpired:
            return f"no profiles: py-spy did not answer within 20 s (fix: {INSTALL_FIX})"
    finally:
        probe.kill()
        probe.wait()
    if done.returncode == 0:
        return None
    said = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}")
    line = said.splitlines()[-1]
    if any(word in said.lower() for word in ("permission", "not permitted", "ptrace")):
        return f"no profiles: this machine does not let py-spy read other processes ({line}) " \
               f"(fix: {PTRACE_FIX})"
    return f"no profiles: py-spy cannot sample a Python process here ({line}) (fix: {INSTALL_FIX})"
