"""The HTML report: self-contained, escaped, with verdicts, warnings, failures, environment."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from servelab.report.base import ReportInput
from servelab.report.html import render_html
from servelab.report.sections import (
    report_sections,
)

from .common import charts, sections


class _Elements(HTMLParser):
    """Tags, ids and outward references of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: list[str] = []
        self.references: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for key, value in attrs:
            if key == "id" and value:
                self.ids.append(value)
            if key in ("src", "href", "xlink:href", "action", "poster") and value:
                self.references.append(value)


def _parse(html: str) -> _Elements:
    parser = _Elements()
    parser.feed(html)
    return parser


def test_html_escapes_what_it_did_not_write(grid: ReportInput) -> None:
    hostile = grid.experiment.model_copy(update={"name": "<script>alert(1)</script>"})
    report = ReportInput.build(hostile, grid.environment, grid.runs)
    html = render_html(report_sections(report, with_files=False))
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_html_shows_verdicts_warnings_failures_and_environment() -> None:
    html = render_html(sections("rate-steps"))
    assert 'class="badge no"' in html  # "no significant difference"
    assert "43 of 3,151 (1.36 %)" in html
    assert "200 x3108, timeout x43" in html  # status counts beside their causes
    assert "requests/s varies by 57.1 %" in html
    assert "stack on CPUs 0, load driver on CPUs 1" in html


@pytest.mark.parametrize("name", ["workers-threads", "rate-steps"])
def test_html_is_self_contained_with_every_chart_inline(name: str) -> None:
    html = render_html(sections(name))
    page = _parse(html)
    assert page.tags.count("svg") == len(charts(name))
    for chart in charts(name):
        assert f'id="chart-{chart.name}"' in html
    # Nothing to fetch: no script, stylesheet link, image, frame or font from anywhere.
    for tag in ("script", "link", "img", "iframe", "object", "embed"):
        assert tag not in page.tags, tag
    assert "@import" not in html and not re.search(r"url\((?!#)", html)  # only in-page refs
    for reference in page.references:  # in-page (#id), relative files, or inline data
        if reference.startswith("data:"):
            continue
        assert not re.match(r"^[a-z]+:", reference) and not reference.startswith("//"), reference
    for target in re.findall(r'href="#([^"]+)"|url\(#([^)]+)\)', html):
        assert "".join(target) in page.ids, f"dangling in-page reference #{''.join(target)}"
    # Several SVGs in one page: their ids must not collide.
    duplicates = {i for i in page.ids if page.ids.count(i) > 1}
    assert not duplicates
    # The sections people look for.
    for section in ("glance", "charts", "errors", "warnings", "tables", "environment"):
        assert f'id="{section}"' in html
