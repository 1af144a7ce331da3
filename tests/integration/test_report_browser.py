"""The HTML report in a real browser: headless Chromium renders it, charts and all.

Chromium loads the page from disk with its network features off; the DOM it
serialises after rendering must hold every chart's SVG, and its screenshot,
saved next to the report, must be a real picture of the page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from matplotlib.image import imread

from servelab.report import browser
from servelab.report.base import ReportInput
from servelab.report.charts import plan_charts
from servelab.report.files import write_report
from servelab.results.store import ResultStore

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not any(browser.find_program(n) for n in browser.CHROMIUM_NAMES),
        reason="Chromium is not installed (apt-get install chromium)",
    ),
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "results"


def _processes_using(profile: Path) -> list[int]:
    """Pids of processes whose command line names ``profile`` (Chromium's --user-data-dir)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(profile) in cmdline:
            pids.append(int(entry.name))
    return pids


def test_chromium_renders_every_chart_and_screenshots_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profiles: list[Path] = []
    real_mkdtemp = browser.tempfile.mkdtemp

    def recording_mkdtemp(*args: object, **kwargs: object) -> str:
        path = real_mkdtemp(*args, **kwargs)  # type: ignore[arg-type]
        if "chromium" in Path(path).name:
            profiles.append(Path(path))
        return path

    monkeypatch.setattr(browser.tempfile, "mkdtemp", recording_mkdtemp)
    report = ReportInput.from_store(ResultStore.open(FIXTURES / "workers-threads"))
    out = tmp_path / "report"
    written = write_report(report, out, screenshot=True)
    html, png = out / "report.html", out / "report.png"
    assert html in written and png in written

    dom = browser.rendered_dom(html)
    charts = [c.name for c in plan_charts(report)]
    assert charts == ["rps", "latency", "heatmap", "errors"]
    for name in charts:
        figure = re.search(rf'<figure id="chart-{name}"[^>]*>(.*?)</figure>', dom, re.S)
        assert figure, f"chart {name} is not in the rendered page"
        assert "<svg" in figure.group(1) and "</svg>" in figure.group(1)
    assert len(re.findall(r"<svg\b", dom)) == len(charts)
    assert "workers=2,threads=2" in dom  # the data, not just the frame

    pixels = imread(png)  # the screenshot next to the report: a real picture of the page
    assert pixels.shape[:2] == (2000, 1280)
    rgb = pixels[..., :3]
    assert rgb.std() > 0.05, "the screenshot is blank"
    # The viridis heatmap or the baseline bar colour: the charts were painted.
    coloured = ((abs(rgb[..., 0] - rgb[..., 1]) > 0.15) | (abs(rgb[..., 1] - rgb[..., 2]) > 0.15))
    assert coloured.mean() > 0.002

    # Two Chromium runs (screenshot, DOM), each with its own profile: all gone.
    assert len(profiles) == 2
    for profile in profiles:
        assert not profile.exists(), f"Chromium's profile {profile} was not removed"
        assert not _processes_using(profile), "a Chromium process outlived the call"


def test_missing_chromium_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser, "find_program", lambda name: None)
    with pytest.raises(browser.MissingToolError, match="Chromium is not installed"):
        browser.chromium_binary()
