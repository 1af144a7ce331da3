"""Load by machine: what each machine that sent load from elsewhere sent, over the runs."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from support import fake_load, fake_run

from servelab.prepare.building import experiment_from_dict
from servelab.report.base import ReportInput
from servelab.report.formats import output_format
from servelab.report.html import render_html
from servelab.report.machines import machine_rows, machines_table
from servelab.report.markdown import render_markdown
from servelab.report.sections import LoadMachinesSection, live_sections
from servelab.report.terminal import render_terminal
from servelab.results.records import LoadMachine

EXPERIMENT = {
    "name": "e",
    "driver": "locust",
    "driver_options": {"expect_workers": 3},
    "baseline": {"name": "a"},
    "variants": [],
    "workloads": [{"name": "w", "load": {"duration_s": 2}}],
    "repetitions": 2,
}


def _run(repetition: int, duration_s: float, *machines: LoadMachine):
    requests = sum(m.requests for m in machines)
    load = fake_load(
        driver="locust", requests=requests, rps=requests / duration_s, machines=machines
    )
    return fake_run("a", "w", repetition, load=load)


def _runs():
    return [
        _run(1, 2.0, LoadMachine(machine="load-b", processes=2, requests=3000, cpu_max_pct=40.0),
             LoadMachine(machine="load-c", processes=1, requests=1000, cpu_max_pct=96.0,
                         cpu_warning=True)),
        _run(2, 4.0, LoadMachine(machine="load-b", processes=2, requests=5000, cpu_max_pct=60.0)),
    ]


def test_each_machine_over_the_runs_it_took_part_in():
    rows = {r.machine: r for r in machine_rows(_runs())}
    b, c = rows["load-b"], rows["load-c"]
    assert (b.runs, b.processes, b.requests) == (2, 2, 8000)
    assert b.rps == pytest.approx(8000 / 6.0)  # its requests over its runs' durations
    assert c.rps == pytest.approx(1000 / 2.0)
    assert b.share == pytest.approx(8 / 9) and c.share == pytest.approx(1 / 9)
    assert (b.cpu_mean_pct, b.cpu_max_pct, b.cpu_warnings) == (50.0, 60.0, 0)
    assert (c.cpu_max_pct, c.cpu_warnings) == (96.0, 1)


def test_in_every_format_and_the_json_export():
    experiment = experiment_from_dict(EXPERIMENT)
    runs = _runs()
    sections = live_sections(experiment, {}, runs)
    (section,) = [s for s in sections if isinstance(s, LoadMachinesSection)]
    assert section.table.rows[0][:6] == ("load-b", "2", "2", "8,000", "1,333.3", "88.9 %")
    markdown = render_markdown(sections)
    assert "## Load by machine" in markdown and "| load-c " in markdown
    assert "<h2>Load by machine</h2>" in render_html(sections)
    screen = io.StringIO()
    Console(file=screen, width=240).print(render_terminal(sections, detail=True))
    assert "Load by machine" in screen.getvalue() and "load-c" in screen.getvalue()
    compact = io.StringIO()
    Console(file=compact, width=240).print(render_terminal(sections, detail=False))
    assert "Load by machine" not in compact.getvalue()  # -v only
    to_json = output_format("json").export_renderer()
    document = json.loads(to_json(ReportInput.build(experiment, {}, runs)))
    assert [m["machine"] for m in document["load_machines"]] == ["load-b", "load-c"]
    assert document["load_machines"][1]["requests"] == 1000


def test_no_section_when_the_load_was_sent_from_here():
    assert machines_table([fake_run("a"), fake_run("a", repetition=2)]) is None
    experiment = experiment_from_dict({**EXPERIMENT, "driver": "oha", "driver_options": {}})
    document = json.loads(
        output_format("json").export_renderer()(ReportInput.build(experiment, {}, [fake_run("a")]))
    )
    assert "load_machines" not in document
