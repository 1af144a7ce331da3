"""One comparison, one verdict, on every output: the Answer, the glance table, the
per-variant blocks, the JSON comparisons and the export's choice all say the same of
each variant on the answer's metric; a figure the design cannot vouch for (requests/s
and latency side by side) is never called better or worse anywhere."""

from __future__ import annotations

import io
import json
import math
import random
import re

import pytest
from rich.console import Console
from support import FakeExecutor, ListSink

from servelab.analysis.analyze import analyze, comparisons_document
from servelab.analysis.metrics import answer_metric
from servelab.export.choose import judge
from servelab.measuring import Runner
from servelab.prepare.building import experiment_from_dict
from servelab.report.answer import build_answer
from servelab.report.base import ReportInput, summary_rows
from servelab.report.html import render_html
from servelab.report.markdown import render_markdown
from servelab.report.sections import report_sections
from servelab.report.tables import variant_tables
from servelab.report.terminal import render_terminal

EFFECTS = {"unix": 0.0, "keepalive": math.log(1.3), "slow": math.log(0.7)}


def measured(side_by_side: bool) -> ReportInput:
    rng = random.Random(4)
    starts: dict[int, float] = {}

    def level(variant, start, tick, workload):
        starts.setdefault(start, rng.gauss(0, 0.01))
        return 1000 * math.exp(EFFECTS.get(variant, 0.0) + starts[start] + rng.gauss(0, 0.01))

    experiment = experiment_from_dict(
        {
            "name": "verdicts",
            "repetitions": 7,
            "baseline": {"name": "base"},
            "variants": [
                {"name": "unix", "proxy": {"transport": "unix"}},
                {"name": "keepalive", "proxy": {"transport": "unix", "upstream_keepalive": 8}},
                {"name": "slow", "proxy": {"upstream_keepalive": 2}},
            ],
            "workloads": [
                {"name": f"w{i}", "request": {"path": "/"}, "load": {"duration_s": 4.0}}
                for i in (1, 2)
            ],
            **({"side_by_side": True} if side_by_side else {}),
        },
        source="test",
    )
    runs = Runner(experiment, ListSink(), FakeExecutor(level)).run()
    return ReportInput.build(experiment, {"hostname": "test"}, runs)


def terminal_text(report: ReportInput) -> str:
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(
        render_terminal(report_sections(report, with_files=False))
    )
    return out.getvalue()


@pytest.mark.parametrize("side_by_side", [True, False])
def test_every_output_gives_each_comparison_one_verdict(side_by_side: bool):
    report = measured(side_by_side)
    experiment, analysis = report.experiment, report.analysis
    metric = answer_metric(experiment)
    answer = build_answer(analysis)
    said: dict[tuple[str, str], set[str]] = {}

    def saw(workload: str, variant: str, verdict: str) -> None:
        said.setdefault((workload, variant), set()).add(verdict)

    for workload in answer.workloads:
        for line in workload.lines:
            saw(workload.workload, line.variant, line.verdict)
    for workload in experiment.workloads:
        for row in summary_rows(report, workload.name):
            if not row.is_baseline:
                saw(workload.name, row.variant, row.verdict_kind)
    for table in variant_tables(analysis, report.runs):
        for verdict in table.verdicts:
            if verdict.text.startswith(f"{metric.label}:"):
                saw(table.table.workload, table.table.variant, verdict.kind)
    for row in comparisons_document(analysis)["comparisons"]:
        if row["metric"] == metric.key:
            saw(row["workload"], row["variant"], row["verdict"])
    assert said and all(len(verdicts) == 1 for verdicts in said.values()), said
    # The planted differences are found; the identical variant is not called different.
    for workload in ("w1", "w2"):
        assert said[(workload, "keepalive")] == {"better"}
        assert said[(workload, "slow")] == {"worse"}
        assert said[(workload, "unix")] <= {"no significant difference", "inconclusive"}
    # The export picks by the same verdicts.
    assert judge(report, "keepalive").eligible and not judge(report, "slow").eligible
    # The rendered outputs: the JSON said the same, and no output judges a figure that
    # is only a share of shared CPUs.
    shown = json.loads(json.dumps(comparisons_document(analysis)))["comparisons"]
    texts = {
        "markdown": render_markdown(report_sections(report, with_files=False)),
        "terminal": terminal_text(report),
        "html": render_html(report_sections(report, with_files=False)),
    }
    if side_by_side:
        assert metric.key == "rps_per_cpu"
        for row in shown:
            if row["metric"] in ("rps", "ok_rps", "latency_mean_ms", "latency_p99_ms"):
                assert row["verdict"] == "not judged"
        judged_share = re.compile(
            r"(Requests per second|Time per request|p99 latency): (better|worse)"
        )
        for name, text in texts.items():
            assert not judged_share.search(text), name
            assert "Verdict on requests per cpu second" in text, name
    for name, text in texts.items():
        assert "winner keepalive" in text.replace("<b>", "").replace("</b>", "").replace(
            "**", ""
        ), name


def test_analysis_is_the_one_source_of_verdicts():
    """Re-analysing gives the same verdicts (nothing judged twice differently)."""
    report = measured(True)
    again = analyze(report.experiment, report.runs)
    key = answer_metric(report.experiment).key
    assert [v.comparisons.get(key) for v in again.variants] == [
        v.comparisons.get(key) for v in report.analysis.variants
    ]
