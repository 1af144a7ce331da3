"""What CI systems show of a check: a GitHub-flavoured markdown summary (a job summary,
``$GITHUB_STEP_SUMMARY``) and JUnit XML (one test case per threshold and workload)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from servelab.analysis.thresholds import Judgement
from servelab.check.base import CheckOutcome

HEADLINES = {
    "held": "✅ passed: no threshold crossed",
    "crossed": "❌ failed: a threshold is crossed",
    "inconclusive": "⚠️ inconclusive: not every threshold could be decided",
}
VERDICTS = {"held": "✅ held", "crossed": "❌ crossed", "inconclusive": "⚠️ inconclusive"}
FLAME_FILE = "servelab-check-flame.svg"


def _change(judgement: Judgement) -> str:
    if judgement.observed is None:
        return "n/a"
    if judgement.threshold.relative:
        return f"{judgement.observed:+.1f} %"
    return f"{judgement.observed:g}"


def _interval(judgement: Judgement) -> str:
    if judgement.interval_pct is None:
        return "—"
    low, high = judgement.interval_pct
    return f"{low:+.1f} % … {high:+.1f} %"


def _measured(outcome: CheckOutcome) -> str:
    if outcome.counts is not None:
        return (f"{outcome.starts} counts of each version's instructions per request "
                "under valgrind (no load)")
    how = "side by side" if outcome.side_by_side else "in turns"
    return f"{outcome.starts} fresh starts of each, measured {how}"


def flame_path(outcome: CheckOutcome, summary_md: Path | None, junit: Path | None) -> Path | None:
    """Where the differential flame graph goes (when the check has one): beside
    --summary-md, else beside --junit, else in the result directory."""
    if outcome.flame_svg is None:
        return None
    beside = summary_md or junit
    return (beside.parent if beside is not None else outcome.result_dir) / FLAME_FILE


def summary_markdown(outcome: CheckOutcome, flame: Path | None = None) -> str:
    """The verdict table, in GitHub-flavoured markdown (naming ``flame``, the differential
    flame graph's file, when it was written)."""
    lines = [
        f"### servelab check: {HEADLINES[outcome.state]}",
        "",
        "| threshold | workload | change | 95 % interval | verdict |",
        "|---|---|---:|---|---|",
    ]
    for j in outcome.judgements:
        lines.append(
            f"| `{j.threshold.text}` | {j.workload} | {_change(j)} | {_interval(j)} | "
            f"{VERDICTS[j.state]} |"
        )
    lines += [
        "",
        f"Candidate `{outcome.candidate}` against baseline `{outcome.baseline}`, "
        f"{_measured(outcome)}; intervals from "
        f"{outcome.test}; {outcome.wall_s:.0f} s; exit code {outcome.exit_code}. "
        f"Result: `{outcome.result_dir}`.",
        "",
    ]
    if outcome.why:  # --profile
        lines += [
            "Where the CPU per request went (`--profile`; the functions that changed most, "
            "95 % intervals; `servelab report` draws the differential flame graph):",
            "", "```", *outcome.why, "```", "",
        ]
    if flame is not None:
        lines += [
            f"Differential flame graph (red where the candidate's CPU per request grew, blue "
            f"where it shrank): `{flame}`. A job summary cannot show a local file: upload it "
            f"as an artifact (actions/upload-artifact).",
            "",
        ]
    return "\n".join(lines)


def junit_result(case: ET.Element, message: str, failed: str | None, skipped: bool) -> None:
    """A JUnit test case's result: a failure of type ``failed``, skipped, or passed with
    ``message`` as its output."""
    if failed is not None:
        ET.SubElement(case, "failure", message=message, type=failed).text = message
    elif skipped:
        ET.SubElement(case, "skipped", message=message)
    else:
        ET.SubElement(case, "system-out").text = message


def junit_text(suites: ET.Element) -> str:
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


def junit_xml(outcome: CheckOutcome) -> str:
    """JUnit XML: a test case per threshold and workload, failed when crossed (and when
    inconclusive, if that fails the check), skipped when inconclusive otherwise."""
    failures = sum(j.state == "crossed" for j in outcome.judgements)
    undecided = sum(j.state == "inconclusive" for j in outcome.judgements)
    inconclusive_fails = outcome.exit_code != 0 and outcome.state == "inconclusive"
    suites = ET.Element("testsuites", name="servelab check")
    suite = ET.SubElement(
        suites, "testsuite", name="servelab check",
        tests=str(len(outcome.judgements)),
        failures=str(failures + (undecided if inconclusive_fails else 0)),
        errors="0",
        skipped=str(0 if inconclusive_fails else undecided),
        time=f"{outcome.wall_s:.3f}",
    )
    for j in outcome.judgements:
        case = ET.SubElement(
            suite, "testcase", classname=f"servelab.check.{j.workload or 'app'}",
            name=j.threshold.text, time="0",
        )
        message = f"{j.threshold.text}: {_change(j)} ({j.reason})"
        failed = "threshold crossed" if j.state == "crossed" else (
            "inconclusive" if j.state == "inconclusive" and inconclusive_fails else None
        )
        junit_result(case, message, failed, skipped=j.state == "inconclusive")
    return junit_text(suites)


def write_outputs(
    outcome: CheckOutcome,
    summary_md: Path | None,
    junit: Path | None,
    step_summary: str | None,
    flame: Path | None = None,
) -> list[Path]:
    """Write what was asked (and append to GitHub's job summary when it is set), and the
    differential flame graph to ``flame`` (``flame_path``) when the check has one."""
    written = []
    if flame is not None and outcome.flame_svg is not None:
        flame.write_text(outcome.flame_svg, encoding="utf-8")
        written.append(flame)
    if summary_md is not None:
        summary_md.write_text(summary_markdown(outcome, flame))
        written.append(summary_md)
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as summary:
            summary.write(summary_markdown(outcome, flame))
        written.append(Path(step_summary))
    if junit is not None:
        junit.write_text(junit_xml(outcome))
        written.append(junit)
    return written
