"""The sdist carries everything a tool install needs to set up a machine and measure: every
module (the set-up logic among them), the templates, the built-in apps and locustfiles,
and the replay sender's Go source that `servelab setup --with replay` builds. (The wheel
is built and installed by test_packaging.py.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

import servelab

pytestmark = pytest.mark.integration

CHECKOUT = Path(__file__).resolve().parents[2]
PACKAGE = CHECKOUT / "src" / "servelab"


def test_the_sdist_holds_the_sources_templates_and_the_senders_go_source(
    tmp_path: Path,
) -> None:
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files"], cwd=CHECKOUT, capture_output=True,
                             text=True, check=True).stdout.split()
    for name in tracked:  # what a clone has: no .venv, no caches
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        if (CHECKOUT / name).is_file():
            shutil.copy2(CHECKOUT / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path / "dist"),
         str(source)], capture_output=True, text=True, timeout=600, check=False,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    [sdist] = (tmp_path / "dist").glob(f"servelab-{servelab.__version__}.tar.gz")
    with tarfile.open(sdist) as archive:
        held = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}

    globs = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["package-data"]["servelab"]
    wanted = {
        path.relative_to(CHECKOUT).as_posix()
        for pattern in ["**/*.py", *globs]
        for path in PACKAGE.glob(pattern)
        if path.is_file() and "__pycache__" not in path.parts
        and path.relative_to(CHECKOUT).as_posix() in tracked
    }
    for needed in ("src/servelab/load/vegeta_replay/main.go",
                   "src/servelab/load/vegeta_replay/go.sum",
                   "src/servelab/setup/steps.py", "src/servelab/host/parts.py",
                   "src/servelab/host/templates/nginx.conf.j2"):
        assert needed in wanted
    assert wanted - held == set()
