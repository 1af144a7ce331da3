"""What the integration tests share: servelab's wheel, built once per test run."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import CLEAN_ENV

import servelab

CHECKOUT = Path(__file__).resolve().parents[2]
NOT_SOURCES = shutil.ignore_patterns(
    ".venv", ".git", "__pycache__", "*.egg-info", ".pytest_cache", ".ruff_cache",
    ".hypothesis", "site", "build", "dist", "servelab-results",
)


@pytest.fixture(scope="session")
def servelab_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """servelab's wheel, built from a copy of the checkout once per test run: under
    pytest-xdist the workers share it (a lock and the run's common temp dir), so that the
    packaging test and the action's test do not build it twice (about 15 s each)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    dist = shared / "servelab-wheel"
    with open(shared / "servelab-wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = sorted(dist.glob("servelab-*.whl"))
        if not built:
            source = shared / "servelab-source"
            shutil.rmtree(source, ignore_errors=True)
            shutil.copytree(CHECKOUT, source, ignore=NOT_SOURCES, symlinks=True)
            done = subprocess.run(
                [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(source)],
                capture_output=True, text=True, timeout=600, env=CLEAN_ENV, check=False,
            )
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
            built = sorted(dist.glob("servelab-*.whl"))
    [wheel] = built
    assert wheel.name.startswith(f"servelab-{servelab.__version__}-")
    return wheel
