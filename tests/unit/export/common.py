"""What the export tests share: two stored results, analysed once."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

from servelab.report.base import ReportInput
from servelab.results.store import ResultStore

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "results"
SLEEPY = FIXTURES / "sleepy-workers"
QUICK = FIXTURES / "quick"


@cache
def load(path: Path) -> ReportInput:
    return ReportInput.from_store(ResultStore.open(path))


def systemd_complaints(units: list[Path]) -> list[str]:
    """What ``systemd-analyze verify`` says about ``units`` (its lines naming them)."""
    done = subprocess.run(
        ["systemd-analyze", "verify", *map(str, units)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    folders = {str(unit.parent) for unit in units}
    return [
        line for line in (done.stdout + done.stderr).splitlines()
        if any(folder in line for folder in folders)
    ]
