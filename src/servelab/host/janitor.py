"""The janitor: a tiny separate process that cleans up if servelab dies.

servelab stops what it starts through context managers, which covers errors
and Ctrl-C, but not SIGKILL or a crash of the interpreter. So while an
experiment runs, servelab keeps this process beside it (in its own session,
so a terminal's signals do not reach it) and tells it, over a pipe, each
process group, temporary directory and network namespace it creates and
removes. When the pipe closes — servelab exited, however it exited — the
janitor stops every group still listed (SIGTERM, then SIGKILL), removes the
directories and deletes the namespaces. A clean exit lists nothing.

Protocol, one line each: ``+group PGID``, ``-group PGID``, ``+path DIR``,
``-path DIR``, ``+netns NAME``, ``-netns NAME``, ``+cgroup DIR``, ``-cgroup DIR``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Set as AbstractSet
from pathlib import Path

from servelab.host.cgroups import remove_cgroup
from servelab.host.procs import group_members


def clean_up(
    groups: set[int], paths: set[str], namespaces: set[str], cgroups: AbstractSet[str] = frozenset()
) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
            # A load driver stopped between its turns (switched passes) handles SIGTERM
            # only once continued.
            os.killpg(pgid, signal.SIGCONT)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(group_members(g) for g in groups):
        time.sleep(0.05)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
    for cgroup in sorted(cgroups, key=len, reverse=True):  # children before parents
        # Busy until the processes killed above have exited, which SIGKILL does not
        # wait for: remove_cgroup retries its rmdir.
        with contextlib.suppress(OSError):
            remove_cgroup(Path(cgroup), timeout_s=2.0)
    for name in namespaces:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)


def main() -> None:
    # The janitor must outlive Ctrl-C and SIGTERM aimed at servelab's group.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    watched: dict[str, set[str]] = {"group": set(), "path": set(), "netns": set(), "cgroup": set()}
    for line in sys.stdin:
        op, _, rest = line.rstrip("\n").partition(" ")
        kind = op[1:]
        if kind not in watched or not rest:
            continue
        if op.startswith("+"):
            watched[kind].add(rest)
        else:
            watched[kind].discard(rest)
    clean_up(
        {int(g) for g in watched["group"]}, watched["path"], watched["netns"], watched["cgroup"]
    )


if __name__ == "__main__":
    main()
