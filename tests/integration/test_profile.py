"""--profile for real: py-spy samples the app server in every measured run, and a
slowdown planted in one named function of one variant comes out as the top contributor,
at about its planted CPU per request; without py-spy, one line and the same measuring."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from support import planted_spin_toml

import servelab
from servelab.host.profiler import py_spy
from servelab.report.why import run_profiles

pytestmark = pytest.mark.integration

PLANTED_US = 300  # the seed app's extra_work() spins this much thread CPU per request


def _experiment(tmp_path: Path, repetitions: int) -> servelab.Experiment:
    path = tmp_path / "why.toml"
    path.write_text(planted_spin_toml("why", PLANTED_US, repetitions, duration_s=2))
    return servelab.Experiment.from_toml(path)


@pytest.mark.skipif(py_spy() is None, reason="py-spy is not installed (the profile extra)")
def test_the_planted_function_is_the_top_contributor(
    tmp_path: Path, no_leftover_processes
) -> None:
    from servelab.analysis.profile import explain_all

    result = servelab.measure(
        _experiment(tmp_path, 4),
        servelab.RunOptions(results_dir=tmp_path / "r", profile=True),
        console=Console(file=io.StringIO()),
    )
    assert all(r.profile is not None and r.profile.samples > 0 for r in result.runs)
    profiles = run_profiles(result)
    assert len(profiles) == 8
    for profile in profiles:  # the stacks add up to the stack's measured CPU per request
        assert sum(profile.stacks.values()) == pytest.approx(profile.total, rel=1e-6)
    [explanation] = explain_all(profiles, "base")
    top = explanation.functions[0]
    assert top.name == "extra_work (servelab/apps/seed_fastapi.py)", explanation
    assert top.comparison.interval is not None
    low, high = top.comparison.interval
    # The interval holds the planted figure, give or take a quarter (py-spy samples at
    # 100 Hz; the spin's own calls to the clock fall in it too).
    assert low - PLANTED_US / 4 <= PLANTED_US <= high + PLANTED_US / 4, (low, high)
    # The report's Why section names it, and the files beside the report exist.
    from servelab.report.files import write_report

    out = tmp_path / "report"
    write_report(result, out)
    assert "extra_work (servelab/apps/seed_fastapi.py)" in (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert 'id="diff-spin-async-small"' in html and "<svg" in html
    assert (out / "profiles" / "speedscope.json").is_file()
    from servelab.report import browser

    if any(browser.find_program(n) for n in browser.CHROMIUM_NAMES):  # opened in Chromium
        dom = browser.rendered_dom(out / "report.html")
        figure = re.search(r'<figure id="diff-spin-async-small"[^>]*>(.*?)</figure>', dom, re.S)
        assert figure is not None and figure.group(1).count("<rect") > 10
        assert "extra_work" in figure.group(1)
    folded = (out / "profiles" / "spin--async-small.folded").read_text()
    assert "app workers;" in folded and "extra_work (servelab/apps/seed_fastapi.py:" in folded


def test_without_py_spy_one_line_and_the_measuring_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leftover_processes
) -> None:
    monkeypatch.setattr("servelab.host.profiler.py_spy", lambda: None)
    said = io.StringIO()
    result = servelab.measure(
        _experiment(tmp_path, 1),
        servelab.RunOptions(results_dir=tmp_path / "r", profile=True),
        console=Console(file=said, width=500),
    )
    lines = [line for line in said.getvalue().splitlines() if "py-spy" in line]
    assert lines == [
        "servelab: no profiles: py-spy is not installed (fix: pip install "
        "'servelab[profile]' (from a checkout: scripts/setup.sh --all))"
    ]
    assert len(result.runs) == 2 and all(r.profile is None for r in result.runs)
    assert all(r.load.requests_total > 0 for r in result.runs)
