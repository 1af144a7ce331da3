"""The history page in a real browser: headless Chromium renders it offline, the series'
charts and their change point and known change are in its DOM, and its screenshot is a
real picture of the page."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest
from matplotlib.image import imread

from servelab.history.page import write_page
from servelab.history.series import METRICS, Point, build_series
from servelab.report import browser

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not any(browser.find_program(n) for n in browser.CHROMIUM_NAMES),
        reason="Chromium is not installed (apt-get install chromium)",
    ),
]


def test_chromium_renders_the_history_page(tmp_path: Path) -> None:
    rng = random.Random(2)
    points = []
    for i in range(40):  # 40 commits, a -10 % step at commit 25, each checked twice
        level = 1000 / (1.1 if i >= 25 else 1.0)
        for check in (1, 2):
            points.append(Point(f"{i:040x}", f"2026-11-{1 + i // 2:02d}T{i % 2:02d}:00:00",
                                level * math.exp(rng.gauss(0, 0.02)), check, "candidate"))
    series = build_series("ci-1", "app", METRICS["rps"], points, 0.2)
    assert [c.index for c in series.changes] == [25]
    _, page = write_page([series], {f"{25:040x}"[:8]: "new serializer"}, 0.2)
    html = tmp_path / "history.html"
    html.write_text(page)
    dom = browser.rendered_dom(html)
    figure = re.search(r"<figure>(.*?)</figure>", dom, re.S)
    assert figure is not None and figure.group(1).count("<path") > 20
    assert "known: new serializer" in figure.group(1)
    assert re.search(r"-\d+\.\d % \[-\d+\.\d, -\d+\.\d\]", figure.group(1))  # the change
    png = browser.screenshot(html, tmp_path / "history.png", width=1200, height=900)
    picture = imread(str(png))
    assert picture.shape[0] == 900 and picture.shape[1] == 1200
    assert picture.std() > 0.05  # not a blank page
