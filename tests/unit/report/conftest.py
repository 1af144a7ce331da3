"""Fixtures of the report tests: two stored results, analysed."""

import pytest

from servelab.report.base import ReportInput

from .common import load


@pytest.fixture
def grid() -> ReportInput:
    return load("workers-threads")


@pytest.fixture
def ramp() -> ReportInput:
    return load("rate-steps")
