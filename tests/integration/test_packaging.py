"""The package as a user installs it: a wheel built from a copy of the checkout, installed
into a fresh virtualenv with no compiler on PATH (the core needs none), then `servelab
--version`, `doctor`, `example` and `study quick -r 1 -d 1` (one endpoint) from that venv."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import CLEAN_ENV

import servelab

pytestmark = pytest.mark.integration

def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    kwargs.setdefault("env", CLEAN_ENV)
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, servelab_wheel: Path) -> Path:
    """servelab's core installed from its wheel (conftest: built once per test run) into a
    fresh venv; the venv's bin dir."""
    root = tmp_path_factory.mktemp("packaging")
    wheel = servelab_wheel
    run([sys.executable, "-m", "venv", str(root / "venv")], timeout=120).check_returncode()
    bin_dir = root / "venv" / "bin"
    no_compiler = {  # the install sees no compiler: only the venv's own programs on PATH
        **CLEAN_ENV, "PATH": str(bin_dir), "CC": "/nonexistent/cc",
    }
    # --no-compile: byte-compiling scipy & co. took 10 of pip's 17 s; Python compiles what
    # it imports anyway.
    done = run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-compile",
                "--disable-pip-version-check", str(wheel)], env=no_compiler, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return bin_dir


def test_the_core_installs_without_a_compiler_and_without_extras(installed: Path) -> None:
    listed = run([str(installed / "python"), "-m", "pip", "list", "--format=freeze"])
    names = {line.split("==")[0].lower() for line in listed.stdout.splitlines()}
    assert {"servelab", "gunicorn", "uvicorn", "uvicorn-worker", "fastapi", "scipy"} <= names
    assert names.isdisjoint({"matplotlib", "django", "mod-wsgi", "granian", "pyuwsgi"})
    version = run([str(installed / "servelab"), "--version"])
    assert version.stdout.strip() == f"servelab, version {servelab.__version__}"
    example = run([str(installed / "servelab"), "example", "port-vs-socket"])
    assert example.returncode == 0 and "[baseline]" in example.stdout


def test_doctor_lists_extras_as_optional(installed: Path) -> None:
    done = run([str(installed / "servelab"), "doctor"], timeout=120)
    assert done.returncode == 0, done.stdout  # nothing the core needs is missing
    lines = done.stdout.splitlines()
    for name in ("extra: servelab[charts]", "extra: servelab[django]", "python: granian"):
        [line] = [line for line in lines if name in line]
        assert "warn" in line and "optional" in line, line


def test_the_quick_study_runs_from_the_installed_package(
    installed: Path, tmp_path: Path, no_leftover_processes
) -> None:
    # One endpoint of the four (3 runs, not 12): the wheel's code, templates and apps are
    # what this checks; the endpoints are the same app's.
    done = run(
        [str(installed / "servelab"), "study", "quick", "-r", "1", "-d", "1", "--endpoints",
         "async-small", "--results", str(tmp_path)],
        cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "report"
    written = run([str(installed / "servelab"), "report", "1", "--results", str(tmp_path),
                   "--out", str(out)], timeout=120)
    assert written.returncode == 0, written.stderr[-3000:]
    # No matplotlib in the core: the report says so instead of drawing.
    note = "no charts: matplotlib is not installed (fix: servelab setup)"
    assert note in (out / "report.md").read_text()
    assert note in (out / "report.html").read_text()
