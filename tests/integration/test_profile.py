"""--profile for real: py-spy samples the app server in every measured run, and a
slowdown planted in one named function of one variant comes out as the top contributor,
at about its planted CPU per request; the parts add up to the stack's CPU per request
measured without profiling, within the overhead the report states; without py-spy, one
line and the same measuring."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from support import PLANTED_KINDS, planted_spin_toml

import servelab
from servelab.host.profiler import py_spy
from servelab.report.base import ReportInput
from servelab.report.why import run_profiles

pytestmark = pytest.mark.integration

PLANTED_US = 300  # the seed app's extra_work() spins this much thread CPU per request


def _experiment(
    tmp_path: Path, repetitions: int, also: tuple[str, ...] = (), duration_s: float = 2
) -> servelab.Experiment:
    path = tmp_path / "why.toml"
    path.write_text(
        planted_spin_toml("why", PLANTED_US, repetitions, duration_s=duration_s, also=also)
    )
    return servelab.Experiment.from_toml(path)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> ReportInput:
    """The planted experiment with --profile, 3 starts of each variant: the base, "spin"
    (the compute kind) and "syscalls" (the kind that spends half its time in system
    calls), measured once for the tests that read it."""
    if py_spy() is None:
        pytest.skip("py-spy is not installed (the profile extra)")
    where = tmp_path_factory.mktemp("profiled")
    return servelab.measure(
        _experiment(where, 3, also=("syscalls",)),
        servelab.RunOptions(results_dir=where / "r", profile=True),
        console=Console(file=io.StringIO()),
    )


def _explained(result: ReportInput, variant: str):
    from servelab.analysis.explain import explain_all

    [explanation] = [e for e in explain_all(run_profiles(result), "base")
                     if e.variant == variant]
    return explanation


def test_the_planted_function_is_the_top_contributor(
    profiled: ReportInput, tmp_path: Path
) -> None:
    result = profiled
    assert all(r.profile is not None and r.profile.samples > 0 for r in result.runs)
    profiles = run_profiles(result)
    assert len(profiles) == 9
    for profile in profiles:  # the stacks add up to the stack's measured CPU per request
        assert sum(profile.stacks.values()) == pytest.approx(profile.total, rel=1e-6)
    explanation = _explained(result, "spin")
    top = explanation.functions[0]
    assert top.name == "extra_work (servelab/apps/seed_fastapi.py)", explanation
    assert top.comparison.interval is not None
    low, high = top.comparison.interval
    # Its size: more than half the planted figure, never past it by more than a quarter.
    # Not "the interval holds it": it did in 6 of 6 copies run two at once with the front
    # away from the app while sampled (benchmarks/why.py front; docs/reports.md), but
    # the tests run three at once here, and the crowded kind (issue 37) is still open.
    assert high >= PLANTED_US / 2 and low <= PLANTED_US * 1.25, (low, high)
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


def test_the_parts_add_up_to_the_stack_cpu_of_the_measured_window(
    profiled: ReportInput,
) -> None:
    """Each profiled run's parts add up to its own measured stack CPU per request, the
    figure of a window py-spy did not sample (it samples in a window of its own after each
    measured one, and is stopped and waited for before the next: no overhead in the
    figures, as the report says; the order is tested in tests/unit/measuring/
    test_executor_slots.py).

    Not asserted: that a session without --profile measures the same CPU per request. Two
    short sessions minutes apart differ by up to a third on this project's VM (a fresh-clone
    run read the base +31 %, the machine-speed probe -4 %), and even their variants' ratio
    by 13 % (1.34 and 1.54 in one run), more than the in-window overhead it would catch."""
    from servelab.report.why import ABOUT

    assert "measured without py-spy" in ABOUT
    profiles = run_profiles(profiled)
    runs = {(r.variant, r.repetition): r for r in profiled.runs}
    assert len(profiles) == len(runs) == 9
    for profile in profiles:
        run = runs[(profile.variant, profile.repetition)]
        assert sum(profile.parts.values()) == pytest.approx(
            1e6 * run.stack_cpu_s / run.load.requests_total, rel=1e-6
        )


@pytest.fixture(scope="module")
def without_py_spy(tmp_path_factory: pytest.TempPathFactory) -> tuple[ReportInput, str]:
    """The planted experiment, one short start of each, with --profile where py-spy is
    missing: the result, and what servelab said."""
    said = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("servelab.host.profiler.py_spy", lambda: None)
        result = servelab.measure(
            _experiment(tmp_path_factory.mktemp("without"), 1, duration_s=1),
            servelab.RunOptions(results_dir=tmp_path_factory.mktemp("r"), profile=True),
            console=Console(file=said, width=500),
        )
    return result, said.getvalue()


def test_without_py_spy_one_line_and_the_measuring_goes_on(
    without_py_spy: tuple[ReportInput, str],
) -> None:
    result, said = without_py_spy
    lines = [line for line in said.splitlines() if "py-spy" in line]
    assert lines == [
        "servelab: no profiles: py-spy is not installed (fix: servelab setup --with test "
        "(it installs py-spy))"
    ]
    assert len(result.runs) == 2 and all(r.profile is None for r in result.runs)
    assert all(r.load.requests_total > 0 for r in result.runs)


# Not the crowded kind (4 workers on 2 CPUs): py-spy counts a worker waiting for a CPU
# as running, and the spin read 1.4-3.4 times its size (docs/reports.md): not solved yet.
def test_a_planted_function_of_another_kind_is_the_top_contributor(
    profiled: ReportInput,
) -> None:
    """The planted function that spends half its time in system calls (their kernel time
    is charged to it) comes out on top, at more than half its planted size."""
    top = _explained(profiled, "syscalls").functions[0]
    assert top.name == PLANTED_KINDS["syscalls"][1], top
    assert top.comparison.interval is not None
    # At more than half its size (the old reading of the syscall kind was under half),
    # and not beyond twice it: what 12 planted runs hold every time (docs/reports.md);
    # its 95 % interval held the planted size in 3 of 5 syscall runs, too few to assert.
    change = top.comparison.difference
    assert PLANTED_US / 2 <= change <= 2 * PLANTED_US, (change, top.comparison.interval)
