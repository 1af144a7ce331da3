"""The text renderers (markdown, JSON, CSV) against golden files, for real results.

The fixtures in tests/fixtures/results are real runs (see its README). The
golden files are what the renderers produced for them, reviewed by eye; any
change in the output shows here as a diff. After a deliberate change:
``SERVELAB_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_report_golden.py``,
then review ``git diff tests/fixtures/results/golden``.
"""

from __future__ import annotations

import csv
import io
import json
import os
from functools import cache
from pathlib import Path

import pytest

from servelab.report.base import ReportInput
from servelab.report.data import runs_csv, runs_json
from servelab.report.markdown import render_markdown
from servelab.report.sections import report_sections
from servelab.results.formats import FORMAT_KEY, SPEC
from servelab.results.store import ResultStore

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "results"
GOLDEN = FIXTURES / "golden"
RESULTS = ("quick", "workers-threads", "rate-steps", "sleepy-workers", "locust-remote")
UPDATE = os.environ.get("SERVELAB_UPDATE_GOLDEN") == "1"


def load(name: str) -> ReportInput:
    return ReportInput.from_store(ResultStore.open(FIXTURES / name))


@cache
def render(name: str) -> dict[str, str]:
    """What ``servelab report`` writes as text (cached: the charts take a second to draw)."""
    report = load(name)
    return {
        "report.md": render_markdown(report_sections(report)),
        "runs.json": runs_json(report),
        "runs.csv": runs_csv(report),
    }


@pytest.mark.parametrize("name", RESULTS)
def test_text_renderers_match_golden_files(name: str) -> None:
    rendered = render(name)
    for file_name, text in rendered.items():
        golden = GOLDEN / name / file_name
        if UPDATE:
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(text)
        assert golden.exists(), f"no golden file {golden}; run with SERVELAB_UPDATE_GOLDEN=1"
        assert text == golden.read_text(), (
            f"{file_name} for {name} differs from {golden}; if the change is deliberate, "
            "rerun with SERVELAB_UPDATE_GOLDEN=1 and review the diff"
        )


@pytest.mark.parametrize("name", RESULTS)
def test_json_and_csv_hold_every_raw_run(name: str) -> None:
    # Every run as stored, but for the store's own mark of the record's format.
    raw = [
        {k: v for k, v in json.loads(line).items() if k != FORMAT_KEY}
        for line in (FIXTURES / name / "runs.jsonl").read_text().splitlines()
    ]
    rendered = render(name)
    document = json.loads(rendered["runs.json"])
    assert document["runs"] == raw  # every field of every run, unchanged
    stored = json.loads((FIXTURES / name / "experiment.json").read_text())
    # As stored (in the current format), not re-defaulted.
    assert document["experiment"] == SPEC.current(stored["experiment"])
    rows = list(csv.DictReader(io.StringIO(rendered["runs.csv"])))
    assert len(rows) == len(raw)
    for row, run in zip(rows, raw, strict=True):
        assert (row["variant"], row["workload"], int(row["repetition"])) == (
            run["variant"], run["workload"], run["repetition"]
        )
        assert float(row["rps"]) == run["load"]["rps"]
        assert float(row["latency_p99_ms"]) == run["load"]["latency_p99_ms"]
        for code, count in run["load"]["status_counts"].items():
            assert int(row[f"status_{code}"]) == count
        for kind, count in run["load"]["connection_errors"].items():
            assert int(row[f"conn_{kind}"]) == count


def test_markdown_carries_tables_verdicts_warnings_and_environment() -> None:
    text = render("rate-steps")["report.md"]
    # The seed-style table of report/tables.py, with its header row.
    assert "| **Test attribute**" in text and "Difference to baseline" in text
    # analysis.verdict_line for each variant against the baseline.
    assert "- Requests per second: no significant difference, -28.86 %" in text
    # Failures and their causes (report/failures.py): TCP timed out at 4000 requests/s.
    assert "| rate-4000  | tcp       | 3,151      | 43 (1.4%) | 200 x3108, timeout x43 |" in text
    # Warnings as data, with their fixes.
    assert "- **errors** (tcp / rate-4000): 43 of 3151 requests failed (timeout: 43). Hint:" in text
    assert "## Environment" in text and "| CPU placement" in text
    assert "![Latency and errors against the arrival rate](charts/ramp.svg)" in text
    # The test behind the verdicts, named from the comparisons (2 rounds each: Welch's).
    assert "against the baseline (95 %, Holm-adjusted) come from: Welch's t-test." in text
    assert "## How it was measured" in text and "- Repetitions: 2, each on a fresh" in text
