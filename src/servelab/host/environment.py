"""Facts about the machine and tool versions, recorded with every experiment."""

from __future__ import annotations

import os
import platform
import resource
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from servelab.host.paths import find_program


def read_sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def program_version(argv: list[str]) -> str | None:
    """First line a program prints about its version (stdout or stderr), or None."""
    if find_program(argv[0]) is None:
        return None
    try:
        done = subprocess.run(
            [find_program(argv[0]) or argv[0], *argv[1:]],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else None


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# Facts about what servelab set up around the stacks for the experiment under way
# (e.g. the Django app's database and the link to it); see ``recorded``.
_SETUP: dict[str, Any] = {}


@contextmanager
def recorded(key: str, value: Any) -> Iterator[None]:
    """Record ``key: value`` in every environment collected during the block.

    For what is set up before an experiment's session starts and is not a fact
    of the machine: ``servelab.apps.user.app_database`` records the database and
    its link this way, so the stored result (and its report) says what was used.
    """
    _SETUP[key] = value
    try:
        yield
    finally:
        _SETUP.pop(key, None)


def collect_environment() -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "somaxconn": read_sysctl("net.core.somaxconn"),
        "open_files_limit": [soft, hard],
        "python": platform.python_version(),
        "nginx": program_version(["nginx", "-v"]),
        "gunicorn": package_version("gunicorn"),
        "uvicorn": package_version("uvicorn"),
        "granian": package_version("granian"),
        "hypercorn": package_version("hypercorn"),
        "uwsgi": package_version("uwsgi"),
        "fastapi": package_version("fastapi"),
        "servelab": package_version("servelab"),
        **_SETUP,
    }


# What makes two machines "the same" for comparing results.
MACHINE_KEYS = ("hostname", "cpu_model", "cpu_count", "kernel")


def machine_differences(first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    """Human-readable differences between two recorded machines ([] when the same)."""
    return [
        f"{key} {first.get(key)!r} vs {second.get(key)!r}"
        for key in MACHINE_KEYS
        if first.get(key) != second.get(key)
    ]
