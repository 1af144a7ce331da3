"""Charts: the right ones for a result, valid SVG and PNG, deterministic."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest
from matplotlib.image import imread

from servelab.report.base import ReportInput, failure_breakdown
from servelab.report.charts import (
    RampPoint,
    build_charts,
    grid_knobs,
    plan_charts,
    ramp_chart,
    ramp_points,
)
from servelab.report.drawing import Chart
from servelab.results.store import ResultStore

from .common import FIXTURES, charts, load

SVG_NS = "{http://www.w3.org/2000/svg}"


def test_charts_fit_the_result(grid: ReportInput, ramp: ReportInput) -> None:
    assert [c.name for c in plan_charts(load("quick"))] == ["rps", "latency", "errors"]
    assert [c.name for c in plan_charts(grid)] == ["rps", "latency", "heatmap", "errors"]
    assert [c.name for c in plan_charts(ramp)] == ["rps", "latency", "ramp", "errors"]


def test_grid_knobs_are_detected_from_the_variant_specs(grid: ReportInput) -> None:
    assert grid_knobs(grid.experiment.stacks) == ("server.workers", "server.threads")
    # quick varies transport and keepalive: not two numeric knobs, no heatmap.
    assert grid_knobs(load("quick").experiment.stacks) is None
    # sleepy-workers varies workers, threads, worker class and transport together.
    assert grid_knobs(load("sleepy-workers").experiment.stacks) is None


@pytest.mark.parametrize("name", ["quick", "workers-threads", "rate-steps", "sleepy-workers"])
def test_every_chart_is_valid_svg_and_png(name: str) -> None:
    report = load(name)
    for chart in charts(name):
        root = ET.fromstring(chart.svg.encode())
        assert root.tag == f"{SVG_NS}svg", chart.name
        if chart.name == "errors" and not failure_breakdown(report.runs):
            assert "No failed requests" in chart.svg
        else:  # drawn data, not an empty canvas: matplotlib draws marks as paths
            assert len(root.findall(f".//{SVG_NS}path")) > 5, chart.name
        assert chart.png.startswith(b"\x89PNG\r\n\x1a\n")
        pixels = imread(io.BytesIO(chart.png))
        assert pixels.shape[0] > 200 and pixels.shape[1] > 300
        assert pixels.std() > 0.05, f"{chart.name} looks blank"


def test_rps_chart_shows_every_variant_and_workload(grid: ReportInput) -> None:
    svg = next(c for c in charts("workers-threads") if c.name == "rps").svg
    for stack in grid.experiment.stacks:
        assert f">{stack.name}<" in svg
    assert ">sync-small<" in svg
    assert "95 % CI" in svg and ">baseline<" in svg


def test_heatmap_cells_hold_the_mean_requests_per_second(grid: ReportInput) -> None:
    svg = next(c for c in charts("workers-threads") if c.name == "heatmap").svg
    for variant in grid.analysis.variants:
        assert f">{variant.metrics['rps'].summary.mean:,.0f}<" in svg
    assert ">workers<" in svg and ">threads<" in svg


def test_charts_are_deterministic() -> None:
    again = ReportInput.from_store(ResultStore.open(FIXTURES / "workers-threads"))
    assert [c.svg for c in charts("workers-threads")] == [c.svg for c in build_charts(again)]


def test_ramp_points_come_from_the_open_model_workloads(ramp: ReportInput) -> None:
    points = ramp_points(ramp)
    assert set(points) == {"tcp", "unix"}
    assert [p.rate for p in points["tcp"]] == [500.0, 1500.0, 4000.0]
    tcp_4000 = points["tcp"][-1]
    assert tcp_4000.error_ratio == pytest.approx(43 / 3151)
    assert points["unix"][-1].error_ratio == 0.0
    assert ramp_points(load("quick")) == {}


def test_ramp_chart_takes_a_plain_list_of_points() -> None:
    # Shaped like the seed's backlog study (nginx_gunicorn_somaxconn.md): 1 sync worker,
    # 2 s per request; fine at low rates, then 502s once the backlog overflows.
    points = [
        (0.5, 2010.0, 0.0),
        (1.0, 4020.0, 0.0),
        (50.0, 60_100.0, 0.0),
        (200.0, 64_500.0, 0.335),
        (400.0, 65_000.0, 0.61),
    ]
    chart = ramp_chart(points, p99_limit_ms=5000, max_error_ratio=0.01)
    assert isinstance(chart, Chart) and chart.name == "ramp"
    assert "first errors at 200 req/s" in chart.svg
    assert "p99 limit 5000 ms" in chart.svg and "error limit 1 %" in chart.svg
    assert [RampPoint(*p) for p in points][3].error_ratio == 0.335
    with pytest.raises(ValueError, match="at least one point"):
        ramp_chart([])
