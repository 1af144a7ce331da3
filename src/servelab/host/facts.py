"""Facts read from the machine itself: kernel settings, the CPU's model, the versions of
programs and Python packages. What a result records of them (and of every plug-in's
version) is servelab.prepare.environment."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

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
    """The installed version of distribution ``name`` ("a|b": of the first of either that
    is installed), or None."""
    for one in name.split("|"):
        try:
            return metadata.version(one)
        except metadata.PackageNotFoundError:
            continue
    return None
