"""The history page's text: each series' figures and change points, and what it says
when matplotlib (the charts extra) is not installed. Its charts in a real browser:
tests/integration/test_history_browser.py."""

from __future__ import annotations

from servelab.history.page import write_page
from servelab.history.series import METRICS, Point, build_series
from servelab.report.base import NO_MATPLOTLIB


def _series():
    points = [
        Point(f"{i:040x}", f"2026-11-01T{i:02d}:00:00", (1000 if i < 6 else 800) + check,
              check, "candidate")
        for i in range(10) for check in (1, 2)
    ]
    return build_series("ci-1", "app", METRICS["rps"], points, 0.2)


def test_the_page_has_a_chart_per_series_and_the_change_in_its_text() -> None:
    markdown, page = write_page([_series()], {}, 0.2)
    assert page.count("<figure>") == 1 and "<svg" in page
    assert "| at commit |" in markdown and f"`{6:040x}"[:11] in markdown
    assert NO_MATPLOTLIB not in markdown


def test_without_matplotlib_the_page_says_so_and_keeps_its_figures(
    without_matplotlib: None,
) -> None:
    markdown, page = write_page([_series()], {}, 0.2)
    assert "<figure>" not in page and NO_MATPLOTLIB in markdown
    assert "| at commit |" in markdown  # the change points are still there
