"""Memory per worker: the app server's processes summed and divided by the workers."""

from __future__ import annotations

import pytest
from support import fake_run, memory_lines

from servelab.report.memory import memory_rows
from servelab.results.records import ProcessUsage, RunRecord
from servelab.studies import StudyOptions, get_study


def _run(variant: str, app_mib: list[int], nginx_mib: int) -> RunRecord:
    procs = [
        ProcessUsage(role="nginx", pid=1, name="nginx", cpu_s=0, peak_rss_bytes=nginx_mib << 20)
    ]
    procs += [
        ProcessUsage(role="app", pid=10 + i, name="x", cpu_s=0, peak_rss_bytes=m << 20)
        for i, m in enumerate(app_mib)
    ]
    return fake_run(variant, processes=tuple(procs))


def test_memory_per_worker() -> None:
    exp = get_study("server-shootout").build(StudyOptions(duration_s=2))
    runs = [
        _run("gunicorn-uvicorn", [30, 60, 60], 4),
        _run("gunicorn-uvicorn", [30, 62, 62], 6),
        _run("granian", [20, 40, 40], 4),
    ]
    rows = {r.variant: r for r in memory_rows(exp, runs)}
    assert set(rows) == {"gunicorn-uvicorn", "granian"}  # no runs, no row
    gunicorn = rows["gunicorn-uvicorn"]
    assert gunicorn.app_mib == pytest.approx(152.0)
    assert gunicorn.per_worker_mib == pytest.approx(76.0)
    assert gunicorn.largest_mib == pytest.approx(61.0)
    assert gunicorn.nginx_mib == pytest.approx(5.0)
    text = "\n".join(memory_lines(exp, runs))
    assert "## Memory per worker" in text and "| granian " in text


def test_memory_section_only_when_servers_differ() -> None:
    exp = get_study("port-vs-socket").build(StudyOptions(requests=10))
    assert memory_lines(exp, [_run("nginx-tcp", [10, 20], 3)]) == []
