"""scripts/setup.sh leaves the machine's own services alone: run twice, a running host
nginx (Debian's, with its own config and pid file) is still running, the same process."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="starts Debian's nginx service (root)"),
    pytest.mark.skipif(
        not Path("/etc/nginx/nginx.conf").is_file() or shutil.which("nginx") is None,
        reason="no Debian nginx",
    ),
]

CHECKOUT = Path(__file__).resolve().parents[2]
HOST_PID_FILE = Path("/run/nginx.pid")  # Debian's nginx.conf: pid /run/nginx.pid


def host_nginx_pid() -> int | None:
    try:
        pid = int(HOST_PID_FILE.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def port_80_taken() -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", 80)) == 0


def test_setup_twice_leaves_a_running_host_nginx_running() -> None:
    pid = host_nginx_pid()
    started_here = pid is None
    if started_here:
        if port_80_taken():
            pytest.skip("port 80 is taken by something else: cannot start a host nginx")
        subprocess.run(["nginx"], check=True, timeout=30)  # as Debian's service would
        for _ in range(50):
            pid = host_nginx_pid()
            if pid is not None:
                break
            time.sleep(0.1)
        assert pid is not None, "the host nginx did not start"
    try:
        for _ in range(2):
            done = subprocess.run(
                ["./scripts/setup.sh", "--all"], cwd=CHECKOUT, capture_output=True, text=True,
                timeout=1800, check=False,
            )
            assert done.returncode == 0, done.stderr[-2000:]
            assert host_nginx_pid() == pid, "setup.sh stopped the host's nginx"
    finally:
        if started_here and pid is not None:
            subprocess.run(["nginx", "-s", "quit"], timeout=30, check=False)
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                time.sleep(0.1)
