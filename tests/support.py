"""Helpers shared by the integration tests (importable as ``support``: tests/ is on
sys.path because tests/conftest.py lives there)."""

from __future__ import annotations

import signal
from pathlib import Path

from servelab.stacks import OWNER_ENV


def owned_by(pid: int) -> list[int]:
    """Processes started (directly or not) by servelab process ``pid``: they carry its
    marker in their environment, so other people's servers on this machine do not count."""
    marker = f"{OWNER_ENV}={pid}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def with_default_sigint() -> None:
    """Popen ``preexec_fn``: the child starts with SIGINT at its default, so Python turns a
    test's Ctrl-C into KeyboardInterrupt even when the test run itself was started with
    SIGINT ignored (a background job of a non-interactive shell, nohup ... &)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
