"""What `servelab bisect` writes for CI, as `servelab check` does (check/outputs.py): the
steps and the answer as GitHub-flavoured markdown (--summary-md, GitHub's step
summary), JSON (--json) and JUnit XML (--junit)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import asdict

from servelab.check.outputs import junit_result, junit_text
from servelab.history.bisect import Outcome


def short(name: str) -> str:
    """A commit's hash as git shows it short; a lock state's name as it is."""
    return name[:10] if re.fullmatch(r"[0-9a-f]{40}", name) else name


def outcome_json(outcome: Outcome, good: str, bad: str, unit: str = "commit") -> str:
    return json.dumps({
        "good": good, "bad": bad, "unit": unit, "ending": outcome.ending,
        "first_bad": outcome.first_bad, "last_good": outcome.last_good,
        "untestable": list(outcome.untestable), "summary": outcome.summary(unit),
        "steps": [asdict(s) for s in outcome.steps],
    }, indent=2) + "\n"


def summary_markdown(outcome: Outcome, good: str, bad: str, unit: str = "commit") -> str:
    mark = {"found": "❌ found", "no change": "✅ no change", "unresolved": "❔ unresolved"}
    lines = [
        f"### servelab bisect: {mark[outcome.ending]}", "",
        f"{outcome.summary(unit)} (from `{good}` to `{bad}`).", "",
        f"| # | {unit} | attempt | decision | figures |", "|---:|---|---:|---|---|",
    ]
    lines += [
        f"| {n} | `{short(s.commit)}` | {s.attempt} | {s.decision} | {s.detail} |"
        for n, s in enumerate(outcome.steps, 1)
    ]
    return "\n".join(lines) + "\n"



def junit_xml(outcome: Outcome, good: str, bad: str, unit: str = "commit") -> str:
    """JUnit XML: a test case per step (failed when the commit was slower than the good
    one, skipped when unknown or not measurable) and one for the answer (failed when a
    first slower commit was found, skipped when unresolved), so a CI's test view names
    the culprit."""
    answer_fails = outcome.ending == "found"
    slower = sum(s.decision == "slower" for s in outcome.steps)
    unknown = sum(s.decision in ("unknown", "skipped") for s in outcome.steps)
    suites = ET.Element("testsuites", name="servelab bisect")
    suite = ET.SubElement(
        suites, "testsuite", name="servelab bisect", tests=str(len(outcome.steps) + 1),
        failures=str(slower + answer_fails), errors="0",
        skipped=str(unknown + (outcome.ending == "unresolved")),
    )
    for number, step in enumerate(outcome.steps, 1):
        case = ET.SubElement(
            suite, "testcase", classname="servelab.bisect.step",
            name=f"{number}: {short(step.commit)} (attempt {step.attempt})", time="0",
        )
        junit_result(case, f"{step.commit}: {step.decision}; {step.detail}",
                     "slower" if step.decision == "slower" else None,
                     skipped=step.decision in ("unknown", "skipped"))
    answer = ET.SubElement(suite, "testcase", classname="servelab.bisect",
                           name=f"from {good} to {bad}", time="0")
    junit_result(answer, outcome.summary(unit), f"first slower {unit}" if answer_fails else None,
                 skipped=outcome.ending == "unresolved")
    return junit_text(suites)
