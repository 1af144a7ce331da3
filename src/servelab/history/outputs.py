"""What `servelab bisect` writes for CI, as `servelab check` does (check/outputs.py): the
steps and the answer as GitHub-flavoured markdown (--summary-md, GitHub's step
summary), JSON (--json) and JUnit XML (--junit)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict

from servelab.history.bisect import Outcome


def outcome_json(outcome: Outcome, good: str, bad: str) -> str:
    return json.dumps({
        "good": good, "bad": bad, "ending": outcome.ending, "first_bad": outcome.first_bad,
        "last_good": outcome.last_good, "summary": outcome.summary(),
        "steps": [asdict(s) for s in outcome.steps],
    }, indent=2) + "\n"


def summary_markdown(outcome: Outcome, good: str, bad: str) -> str:
    mark = {"found": "❌ found", "no change": "✅ no change", "unresolved": "❔ unresolved"}
    lines = [
        f"### servelab bisect: {mark[outcome.ending]}", "",
        f"{outcome.summary()} (from `{good}` to `{bad}`).", "",
        "| # | commit | attempt | decision | figures |", "|---:|---|---:|---|---|",
    ]
    lines += [
        f"| {n} | `{s.commit[:10]}` | {s.attempt} | {s.decision} | {s.detail} |"
        for n, s in enumerate(outcome.steps, 1)
    ]
    return "\n".join(lines) + "\n"



def junit_xml(outcome: Outcome, good: str, bad: str) -> str:
    """JUnit XML: a test case per step (failed when the commit was slower than the good
    one, skipped when unknown) and one for the answer (failed when a first slower commit
    was found, skipped when unresolved), so a CI's test view names the culprit."""
    answer_fails = outcome.ending == "found"
    slower = sum(s.decision == "slower" for s in outcome.steps)
    unknown = sum(s.decision == "unknown" for s in outcome.steps)
    suites = ET.Element("testsuites", name="servelab bisect")
    suite = ET.SubElement(
        suites, "testsuite", name="servelab bisect", tests=str(len(outcome.steps) + 1),
        failures=str(slower + answer_fails), errors="0",
        skipped=str(unknown + (outcome.ending == "unresolved")),
    )
    for number, step in enumerate(outcome.steps, 1):
        case = ET.SubElement(
            suite, "testcase", classname="servelab.bisect.step",
            name=f"{number}: {step.commit[:10]} (attempt {step.attempt})", time="0",
        )
        message = f"{step.commit}: {step.decision}; {step.detail}"
        if step.decision == "slower":
            ET.SubElement(case, "failure", message=message, type="slower").text = message
        elif step.decision == "unknown":
            ET.SubElement(case, "skipped", message=message)
        else:
            ET.SubElement(case, "system-out").text = message
    answer = ET.SubElement(suite, "testcase", classname="servelab.bisect",
                           name=f"from {good} to {bad}", time="0")
    message = outcome.summary()
    if answer_fails:
        ET.SubElement(answer, "failure", message=message, type="first slower commit").text = (
            message
        )
    elif outcome.ending == "unresolved":
        ET.SubElement(answer, "skipped", message=message)
    else:
        ET.SubElement(answer, "system-out").text = message
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")
