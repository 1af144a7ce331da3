"""A capacity search's files: trials.jsonl (every trial as it ends), capacity.json (the
answers, rewritten after each turn), capacity.md, the chart and capacity.html, and the
--export-FORMAT files; results are never lost to a stop."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servelab.capacity.plan import CapacityPlan, VariantCapacity
from servelab.capacity.trials import Trial

TRIALS_FILE = "trials.jsonl"
ANSWER_FILE = "capacity.json"
MARKDOWN_FILE = "capacity.md"


class TrialLog:
    """trials.jsonl and capacity.json in one directory: every trial appended as it ends,
    the answers rewritten after each (results are never lost to a stop)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / TRIALS_FILE

    def add(self, trial: Trial) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(trial.to_dict()) + "\n")

    def write_answer(self, header: dict[str, Any], answers: list[VariantCapacity]) -> None:
        from servelab.capacity.compare import compare_capacities

        comparisons = (
            compare_capacities(answers, header["confidence"]) if len(answers) > 1 else []
        )
        text = json.dumps({
            **header, "variants": [a.to_dict() for a in answers],
            "comparisons": [dataclasses.asdict(c) for c in comparisons],
        }, indent=2)
        tmp = self.directory / f".{ANSWER_FILE}.tmp"
        tmp.write_text(text + "\n")
        tmp.replace(self.directory / ANSWER_FILE)


def read_trials(directory: Path) -> list[Trial]:
    path = directory / TRIALS_FILE
    return [Trial.from_dict(json.loads(line)) for line in path.read_text().splitlines() if line]


def new_result_directory(results_dir: Path, name: str) -> Path:
    """results_dir/capacity-<name>-<time>/, new for each search."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = results_dir / f"capacity-{name}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = results_dir / f"capacity-{name}-{stamp}-{n}"
    path.mkdir(parents=True)
    return path


def write_answer_files(
    directory: Path, answers: list[VariantCapacity], plan: CapacityPlan, where: str,
    exports: Mapping[str, Path] | None = None,
) -> None:
    """capacity.md, and with trials the charts (capacity.svg/.png: p99 against the rate;
    capacity-curve.svg/.png: the holding curves) and capacity.html (all together,
    self-contained); ``exports`` (--export-FORMAT):
    json the answer (capacity.json), markdown capacity.md, csv every trial."""
    import shutil

    from servelab.capacity.answer import (
        capacity_chart,
        curve_chart,
        html_page,
        markdown,
        trials_csv,
    )
    from servelab.report.base import NO_MATPLOTLIB, draw_if_installed

    chart = curve = None
    text = markdown(answers, plan.slo, plan.confidence, where)
    if any(a.trials for a in answers):
        chart = draw_if_installed(lambda: capacity_chart(answers, plan.slo, plan.confidence))
        if chart is None:
            text += f"\n{NO_MATPLOTLIB}\n"
        else:
            (directory / "capacity.svg").write_text(chart.svg)
            (directory / "capacity.png").write_bytes(chart.png)
            curve = curve_chart(answers, plan.slo)
            if curve is not None:  # the holding curves: capacity-curve.svg, .png
                (directory / f"{curve.name}.svg").write_text(curve.svg)
                (directory / f"{curve.name}.png").write_bytes(curve.png)
    (directory / MARKDOWN_FILE).write_text(text)
    exports = exports or {}
    if "markdown" in exports:
        exports["markdown"].write_text(text)
    if "csv" in exports:
        exports["csv"].write_text(trials_csv(answers))
    if "json" in exports and (directory / ANSWER_FILE).is_file():
        shutil.copyfile(directory / ANSWER_FILE, exports["json"])
    (directory / "capacity.html").write_text(html_page(text, chart, curve))
