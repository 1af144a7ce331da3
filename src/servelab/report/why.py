"""The report's "Why" part: where each variant's CPU per request went against the
baseline's (``--profile``), in lines every format prints, and the flame graphs and files
that ``servelab report`` adds (inline SVG in the HTML page; speedscope JSON and folded
stacks beside it)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from servelab.analysis.explain import Explanation, answer_line, explain_all, why_lines
from servelab.analysis.profile import RunProfile, mean_stacks
from servelab.report.base import ReportInput
from servelab.report.flames import flame_svg, speedscope_json
from servelab.results.profiles import folded_text

PROFILES_OUT_DIR = "profiles"
SPEEDSCOPE_FILE = "speedscope.json"
# What profiling costs, measured (benchmarks/why.py; docs/validation/why.md has the figures).
OVERHEAD = (
    "Every figure of this report is measured without py-spy: it samples the stack in a "
    "window of its own right after each measured one (the same start, the same load), "
    "which makes the measuring take longer (quick on 2 CPUs: 225-229 s instead of 122-154 "
    "s, so fewer rounds within its budget). Sampled inside the measured windows, its pauses "
    "cost quick's stacks 27-64 % of their requests/s and left none of its answers clear."
)
ABOUT = (
    "CPU per request of every part of the stack, from each run's measured CPU seconds; "
    "each part's kernel (system) time measured as a line of its own, its user time split "
    "by function in proportion to py-spy's samples (self time: the function itself, not "
    "what it calls; then functions with their callees, no stack counted twice). Against "
    "the baseline, 95 % intervals over starts (paired by round where both were measured in "
    "the same rounds), largest first; \"unexplained\" is the stack's difference less the "
    "lines shown. py-spy counts a thread waiting for a CPU as busy: where threads waited, "
    "a function's share counts its waits too (said under the explanation). "
    + OVERHEAD
)


@dataclass(frozen=True)
class FlameGraph:
    name: str  # unique in the report: its id and file name
    title: str
    svg: str


def run_profiles(report: ReportInput) -> list[RunProfile]:
    """Every run of ``report`` whose profile is on disk, per request."""
    return list(report.run_profiles)


def explained(report: ReportInput, profiles: Sequence[RunProfile]) -> list[Explanation]:
    """Each variant against the baseline, per workload (for ``why_text`` and
    ``answer_lines``: worked out once per report)."""
    return explain_all(profiles, report.experiment.baseline.name)


def why_text(explanations: Sequence[Explanation], profiles: Sequence[RunProfile]) -> list[str]:
    """Each variant's explanation against the baseline, a few lines each."""
    lines: list[str] = []
    for explanation in explanations:
        lines += why_lines(explanation)
    if not lines and profiles:
        lines.append("Profiled, but the baseline and a variant are not both profiled yet.")
    return lines


def answer_lines(explanations: Sequence[Explanation]) -> list[str]:
    """One line per variant and workload for under the answer."""
    return [answer_line(e) for e in explanations]


def profile_notes(report: ReportInput) -> list[str]:
    """What is missing from the profiles (py-spy failed for a server), once each."""
    problems = (p for run in report.runs if run.profile for p in run.profile.problems)
    return list(dict.fromkeys(problems))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


def flame_graphs(report: ReportInput, profiles: Sequence[RunProfile]) -> list[FlameGraph]:
    """Per workload: each variant's flame graph, then each one's differential graph
    against the baseline."""
    baseline = report.experiment.baseline.name
    graphs = []
    for workload in report.experiment.workloads:
        means = {
            stack.name: mean_stacks(mine)
            for stack in report.experiment.stacks
            if (mine := [p for p in profiles
                         if p.variant == stack.name and p.workload == workload.name])
        }
        for variant, stacks in means.items():
            graphs.append(FlameGraph(
                f"flame-{_slug(variant)}-{_slug(workload.name)}",
                f"{variant} / {workload.name}", flame_svg(stacks, title=f"{variant}"),
            ))
        for variant, stacks in means.items():
            if variant == baseline or baseline not in means:
                continue
            graphs.append(FlameGraph(
                f"diff-{_slug(variant)}-{_slug(workload.name)}",
                f"{variant} vs {baseline} / {workload.name}",
                flame_svg(stacks, means[baseline], title=f"{variant} vs {baseline}"),
            ))
    return graphs


def write_profile_files(report: ReportInput, out_dir: Path) -> list[Path]:
    """``profiles/<variant>--<workload>.folded`` (CPU µs per request by stack, the mean
    over starts) and one ``profiles/speedscope.json`` holding them all."""
    profiles = run_profiles(report)
    if not profiles:
        return []
    folder = out_dir / PROFILES_OUT_DIR
    folder.mkdir(exist_ok=True)
    written, documents = [], {}
    for workload in report.experiment.workloads:
        for stack in report.experiment.stacks:
            mine = [p for p in profiles
                    if p.variant == stack.name and p.workload == workload.name]
            if not mine:
                continue
            means = mean_stacks(mine)
            documents[f"{stack.name} / {workload.name}"] = means
            path = folder / f"{_slug(stack.name)}--{_slug(workload.name)}.folded"
            path.write_text(folded_text({";".join(s): v for s, v in means.items()}))
            written.append(path)
    speedscope = folder / SPEEDSCOPE_FILE
    speedscope.write_text(speedscope_json(documents, name=report.experiment.name))
    return [*written, speedscope]
