"""The documentation builds, strictly, and documents every command.

``mkdocs build --strict`` fails on a broken link or anchor between pages, a page
missing from the nav or a nav entry without its page, and a snippet whose file is
gone (mkdocs.yml's ``validation`` and ``check_paths``). The command line reference
is generated from the click commands (mkdocs-click); the test below fails when a
command of the ``servelab`` group (or of a group under it) is not on that page.
Needs the ``docs`` extra (``pip install -e '.[docs]'``; scripts/setup.sh installs it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from servelab.cli import cli

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    paths = [str(ROOT / "src"), os.environ.get("PYTHONPATH")]
    env = {
        **os.environ,
        # The checkout's commands, whatever is installed; no mkdocs 2 notice in the log.
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "NO_MKDOCS_2_WARNING": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if "No module named mkdocs" in done.stderr:
        pytest.fail("mkdocs is not installed: pip install -e '.[docs]' (scripts/setup.sh does)")
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


def command_paths(group: click.Group, prefix: str = "servelab") -> list[str]:
    """Every command under ``group``, as its anchor on the reference page
    ("servelab-study", "servelab-results-show")."""
    found = []
    for name, command in group.commands.items():
        if command.hidden:
            continue
        path = f"{prefix}-{name}"
        found.append(path)
        if isinstance(command, click.Group):
            found.extend(command_paths(command, path))
    return found


def test_every_command_is_in_the_cli_reference(site: Path):
    page = (site / "cli" / "index.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'<h[1-6][^>]* id="([^"]+)"', page))
    expected = command_paths(cli)
    assert {"servelab-study", "servelab-results-show"} <= set(expected)
    missing = [path for path in expected if path not in anchors]
    assert not missing, f"commands missing from docs/cli.md's reference: {missing}"
    # click >= 8.3's marker for "no default" must not show as a default (see docs/cli.md).
    assert "<code>Sentinel" not in page


def test_every_study_has_its_page(site: Path):
    from servelab.studies import all_studies

    pages = site / "studies"
    missing = [name for name in all_studies() if not (pages / name / "index.html").exists()]
    assert not missing, f"studies without a page in docs/studies/ (and mkdocs.yml's nav): {missing}"
