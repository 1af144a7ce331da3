"""What the export tests share: two stored results, analysed once."""

from __future__ import annotations

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
