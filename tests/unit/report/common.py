"""What the report tests share: the stored fixtures, analysed and cut into sections once."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from servelab.report.base import ReportInput, Section
from servelab.report.drawing import Chart
from servelab.report.sections import ChartsSection, report_sections
from servelab.results.store import ResultStore

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "results"


@cache
def load(name: str) -> ReportInput:
    """The fixture, analysed; cached."""
    return ReportInput.from_store(ResultStore.open(FIXTURES / name))


@cache
def sections(name: str) -> tuple[Section, ...]:
    """The fixture's report sections; cached, so its charts are drawn once for all tests."""
    return tuple(report_sections(load(name)))


def charts(name: str) -> tuple[Chart, ...]:
    return next(s.charts for s in sections(name) if isinstance(s, ChartsSection))
