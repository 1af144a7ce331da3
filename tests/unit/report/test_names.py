"""Requests by name in the report (from real Locust output), and the driver-bottleneck
warning with the processes it would need."""

from __future__ import annotations

from support import fake_run
from unit.load.common import read

from servelab.analysis.analyze import analyze
from servelab.config.load import LoadSpec
from servelab.load.locust import LocustDriver
from servelab.prepare.building import experiment_from_dict
from servelab.report.html import render_html
from servelab.report.markdown import render_markdown
from servelab.report.names import names_table
from servelab.report.sections import RequestNamesSection, live_sections
from servelab.report.terminal import render_terminal

EXPERIMENT = {
    "name": "e",
    "driver": "locust",
    "baseline": {"name": "a"},
    "variants": [{"name": "b", "proxy": {"transport": "unix"}}],
    "workloads": [{"name": "w", "load": {"duration_s": 2}}],
    "repetitions": 1,
}


def _runs(**update):
    load = LocustDriver(program="locust").parse(read("locust_mix.out"), "", LoadSpec(duration_s=2))
    load = load.model_copy(update=update)
    return [fake_run(v, load=load, driver_cpus="1") for v in ("a", "b")]


def test_requests_by_name_in_every_format():
    experiment = experiment_from_dict(EXPERIMENT)
    runs = _runs()
    table = names_table(experiment, runs)
    assert table is not None
    rows = {(r[1], r[2]): r for r in table.rows}
    assert rows[("a", "POST /bad")][5] == "1,843"
    assert rows[("a", "POST /bad")][6] == "502: 1,843"
    assert rows[("b", "POST /post")][6] == "-"
    sections = live_sections(experiment, {}, runs)
    (named,) = [s for s in sections if isinstance(s, RequestNamesSection)]
    assert "FastRequestUser (FastHttpUser)" in named.about
    markdown = render_markdown(sections)
    assert "## Requests by name" in markdown and "POST /bad" in markdown
    assert "Requests by name" in render_html(sections)
    render_terminal(sections)  # renders


def test_no_section_without_named_requests():
    experiment = experiment_from_dict({**EXPERIMENT, "driver": "oha"})
    assert names_table(experiment, [fake_run("a"), fake_run("b")]) is None


def _bottleneck(runs):
    experiment = experiment_from_dict(EXPERIMENT)
    return [w for w in analyze(experiment, runs).all_warnings if w.kind == "driver-bottleneck"]


def test_a_driver_process_near_a_full_core_is_the_bottleneck():
    # 1.9 s of CPU over a 2 s run in one process: 95 % of a core.
    duration = _runs()[0].load.duration_s
    (warning,) = _bottleneck(_runs(driver_cpu_s=0.95 * duration, driver_processes=1))[:1]
    assert "used 95 % of a core" in warning.message
    assert "at least 2 processes (--locust-processes N" in warning.hint


def test_the_drivers_own_cpu_warning_counts_and_says_how_many():
    duration = _runs()[0].load.duration_s
    # 3 processes busy for 2.4 cores' worth: 2.4 / 0.7 -> 4 processes.
    runs = _runs(driver_cpu_s=2.4 * duration, driver_processes=3, driver_overloaded=True)
    (warning,) = _bottleneck(runs)[:1]
    assert "warned its CPU was above 90 %" in warning.message
    assert "at least 4 processes" in warning.hint


def test_a_driver_with_room_is_not_warned_about():
    duration = _runs()[0].load.duration_s
    assert _bottleneck(_runs(driver_cpu_s=0.5 * duration)) == []


def test_a_cpu_bound_load_machine_is_named():
    duration = _runs()[0].load.duration_s
    details = {**_runs()[0].load.driver_details, "CPU-bound workers": "load-b (97 % of a core)"}
    runs = _runs(driver_cpu_s=0.05 * duration, driver_overloaded=True, driver_details=details)
    (warning,) = _bottleneck(runs)[:1]
    assert warning.message == (
        "the load driver's workers on other machines ran near a full core in run 1 "
        "(load-b (97 % of a core)): they, not the stack, may set the pace"
    )
    assert "or workers on more machines" in warning.hint
