"""What CI systems show of a check: a GitHub-flavoured markdown summary (a job summary,
``$GITHUB_STEP_SUMMARY``), GitHub step outputs (``$GITHUB_OUTPUT``) and JUnit XML (one
test case per threshold and workload)."""

from __future__ import annotations

import contextlib
import json
import secrets
import xml.etree.ElementTree as ET
from pathlib import Path

from servelab.analysis.thresholds import Judgement
from servelab.check.base import CheckOutcome
from servelab.config.thresholds import COUNTED

HEADLINES = {
    "held": "✅ passed: no threshold crossed",
    "crossed": "❌ failed: a threshold is crossed",
    "inconclusive": "⚠️ inconclusive: not every threshold could be decided",
    "error": "⛔ could not run",
}
VERDICTS = {"held": "✅ held", "crossed": "❌ crossed", "inconclusive": "⚠️ inconclusive"}
FLAME_FILE = "servelab-check-flame.svg"
# Past this many times the rounds, a longer budget is not the way to decide a threshold.
MAX_ROUNDS_FACTOR = 16.0


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


def _took(outcome: CheckOutcome) -> str:
    """The time the check took, and against which budget (a count has none)."""
    if outcome.budget_s is None:
        return f"took {outcome.wall_s:.0f} s"
    return f"took {outcome.wall_s:.0f} s of a {_duration(outcome.budget_s)} budget"


def _duration(seconds: float) -> str:
    """'3m', '90s', '1m30s': as --budget takes it."""
    minutes, rest = divmod(round(seconds), 60)
    if not minutes:
        return f"{rest}s"
    return f"{minutes}m{rest}s" if rest else f"{minutes}m"


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory when it is inside it (a CI job's
    workspace), else as it is."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def flame_path(outcome: CheckOutcome, summary_md: Path | None, junit: Path | None) -> Path | None:
    """Where the differential flame graph goes (when the check has one): beside
    --summary-md, else beside --junit, else in the result directory."""
    if outcome.flame_svg is None:
        return None
    beside = summary_md or junit
    return (beside.parent if beside is not None else outcome.result_dir) / FLAME_FILE


def how_to_decide(judgement: Judgement, budget_s: float | None) -> str:
    """What decides an undecided threshold: a longer budget (estimated from its interval:
    a half-width shrinks with the square root of the rounds), or, for a load threshold,
    counting instructions, which a noisy runner does not move."""
    threshold = judgement.threshold
    where = (f"its interval ({_interval(judgement)}) straddles {threshold.limit:+g} %"
             if judgement.interval_pct is not None else judgement.reason)
    longer = "a longer `--budget`"
    if judgement.interval_pct is not None and budget_s is not None:
        low, high = judgement.interval_pct
        distance = abs((low + high) / 2 - threshold.limit)
        rounds = ((high - low) / 2 / distance) ** 2 if distance > 0 else None
        if rounds is None or rounds > MAX_ROUNDS_FACTOR:
            longer = ("a longer `--budget` decides it slowly: the change is about the "
                      "threshold's own size")
        else:
            longer = (f"a longer budget, about `--budget {_duration(budget_s * max(rounds, 2))}` "
                      f"(the interval narrows with the square root of the rounds)")
    elif budget_s is not None:
        longer = f"a longer budget, e.g. `--budget {_duration(2 * budget_s)}`"
    ways = [longer]
    if threshold.metric not in COUNTED and threshold.relative:
        ways.append(
            f"`--fail-if 'instructions > {abs(threshold.limit):+g}%'`, which counts the "
            "app's instructions per request instead of timing it, and decides on a noisy "
            "runner"
        )
    return f"`{threshold.text}` is undecided: {where}. To decide it: " + "; or ".join(ways) + "."


def summary_markdown(outcome: CheckOutcome, flame: Path | None = None) -> str:
    """The verdict table, in GitHub-flavoured markdown (naming ``flame``, the differential
    flame graph's file, when it was written): each threshold, its verdict, the change with
    its interval; the time and budget; where the result is; how to decide what is not."""
    workloads = len({j.workload for j in outcome.judgements}) > 1
    lines = [
        f"### servelab check: {HEADLINES[outcome.state]}",
        "",
        "| threshold |" + (" workload |" if workloads else "") + " verdict | change | "
        "95 % interval |",
        "|---|" + ("---|" if workloads else "") + "---|---:|---|",
    ]
    for j in outcome.judgements:
        lines.append(
            f"| `{j.threshold.text}` |" + (f" {j.workload} |" if workloads else "")
            + f" {VERDICTS[j.state]} | {_change(j)} | {_interval(j)} |"
        )
    lines += [
        "",
        f"Candidate `{outcome.candidate}` against baseline `{outcome.baseline}`: "
        f"{_measured(outcome)}; intervals from {outcome.test}; {_took(outcome)}; exit code "
        f"{outcome.exit_code}.",
        "",
        f"Report: `servelab report {_shown(outcome.result_dir)}` (its result directory).",
        "",
    ]
    undecided = [j for j in outcome.judgements if j.state == "inconclusive"]
    for j in undecided:
        lines += [f"- {how_to_decide(j, outcome.budget_s)}"]
    if undecided:
        lines.append("")
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


def error_markdown(line: str) -> str:
    """The summary of a check that could not run: its one line (problem and fix)."""
    return f"### servelab check: {HEADLINES['error']}\n\n{line}\n"


def step_outputs(outcome: CheckOutcome) -> dict[str, str]:
    """GitHub step outputs ($GITHUB_OUTPUT): the verdict, the exit code, the result
    directory, each threshold's change with its interval (a line each, and as JSON), and
    the summary."""
    rows = [
        {
            "threshold": j.threshold.text, "workload": j.workload, "verdict": j.state,
            "change": j.observed, "unit": "%" if j.threshold.relative else "count",
            "low": j.interval_pct[0] if j.interval_pct else None,
            "high": j.interval_pct[1] if j.interval_pct else None,
        }
        for j in outcome.judgements
    ]
    changes = [
        f"{j.threshold.text}: {_change(j)}"
        + (f" (95 % interval {_interval(j)})" if j.interval_pct else "") + f", {j.state}"
        for j in outcome.judgements
    ]
    return {
        "verdict": outcome.state, "exit-code": str(outcome.exit_code),
        "result-dir": str(outcome.result_dir), "changes": "\n".join(changes),
        "thresholds": json.dumps(rows), "summary": summary_markdown(outcome),
    }


def append_step_outputs(path: str | Path, outputs: dict[str, str]) -> None:
    """Append ``outputs`` to a $GITHUB_OUTPUT file: ``name=value``, or for a value of
    several lines, ``name<<DELIMITER`` ... ``DELIMITER`` with a delimiter the value does
    not hold (GitHub's syntax for multiline values)."""
    with open(path, "a", encoding="utf-8") as file:
        for name, value in outputs.items():
            if "\n" not in value and "\r" not in value:
                file.write(f"{name}={value}\n")
                continue
            delimiter = f"servelab_{secrets.token_hex(8)}"
            while delimiter in value:
                delimiter = f"servelab_{secrets.token_hex(8)}"
            file.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


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
    github_output: str | None = None,
) -> list[Path]:
    """Write what was asked (and append to GitHub's job summary and step outputs when they
    are set), and the differential flame graph to ``flame`` (``flame_path``) when the
    check has one."""
    written = []
    if flame is not None and outcome.flame_svg is not None:
        flame.write_text(outcome.flame_svg, encoding="utf-8")
        written.append(flame)
    if summary_md is not None:
        summary_md.write_text(summary_markdown(outcome, flame), encoding="utf-8")
        written.append(summary_md)
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as summary:
            summary.write(summary_markdown(outcome, flame))
        written.append(Path(step_summary))
    if github_output:
        append_step_outputs(github_output, step_outputs(outcome))
        written.append(Path(github_output))
    if junit is not None:
        junit.write_text(junit_xml(outcome), encoding="utf-8")
        written.append(junit)
    return written


def write_error(line: str, exit_code: int, summary_md: Path | None, step_summary: str | None,
                github_output: str | None) -> None:
    """A check that could not run (bad input, a missing tool): its one line where the
    summary goes, and ``verdict=error`` in the step outputs, so that CI shows why; best
    effort (an output that cannot be written is itself the error being told)."""
    with contextlib.suppress(OSError):
        if summary_md is not None:
            summary_md.write_text(error_markdown(line), encoding="utf-8")
    with contextlib.suppress(OSError):
        if step_summary:
            with open(step_summary, "a", encoding="utf-8") as summary:
                summary.write(error_markdown(line))
    with contextlib.suppress(OSError):
        if github_output:
            append_step_outputs(github_output, {"verdict": "error", "exit-code": str(exit_code),
                                                "error": line})
