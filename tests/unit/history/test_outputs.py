"""What `servelab bisect` writes for CI: JSON, markdown and JUnit XML of the same steps."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from servelab.history.bisect import Outcome, Step
from servelab.history.outputs import junit_xml, outcome_json, summary_markdown

FOUND = Outcome("found", "c" * 40, "b" * 40, (
    Step("d" * 40, "slower", 1, "rps < -5%: crossed (-21 %)", 3),
    Step("b" * 40, "unknown", 1, "rps < -5%: inconclusive", 3),
    Step("b" * 40, "same", 2, "rps < -5%: held (+1 %)", 6),
    Step("c" * 40, "slower", 1, "rps < -5%: crossed (-19 %)", 3),
))


def _cases(xml: str) -> dict[str, ET.Element]:
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    return {case.get("name", ""): case for case in suite.iter("testcase")}


def test_junit_fails_the_slower_steps_and_the_answer_that_names_the_culprit() -> None:
    xml = junit_xml(FOUND, "v1", "HEAD")
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("5", "3", "1")
    cases = _cases(xml)
    assert cases[f"1: {'d' * 10} (attempt 1)"].find("failure") is not None
    assert cases[f"2: {'b' * 10} (attempt 1)"].find("skipped") is not None
    assert cases[f"3: {'b' * 10} (attempt 2)"].find("failure") is None
    answer = cases["from v1 to HEAD"].find("failure")
    assert answer is not None and "c" * 40 in answer.get("message", "")


def test_junit_of_no_change_passes_and_of_unresolved_skips_the_answer() -> None:
    same = Outcome("no change", None, None, (Step("e" * 40, "same", 1, "held"),))
    cases = _cases(junit_xml(same, "v1", "v2"))
    assert all(c.find("failure") is None and c.find("skipped") is None
               for c in cases.values())
    unresolved = Outcome("unresolved", "e" * 40, "a" * 40,
                         (Step("e" * 40, "unknown", 1, "inconclusive"),))
    answer = _cases(junit_xml(unresolved, "v1", "v2"))["from v1 to v2"]
    assert answer.find("skipped") is not None and answer.find("failure") is None


def test_json_and_markdown_carry_every_step() -> None:
    data = json.loads(outcome_json(FOUND, "v1", "HEAD"))
    assert data["ending"] == "found" and data["first_bad"] == "c" * 40
    assert [s["decision"] for s in data["steps"]] == ["slower", "unknown", "same", "slower"]
    text = summary_markdown(FOUND, "v1", "HEAD")
    assert text.startswith("### servelab bisect: ❌ found")
    assert text.count(f"`{'b' * 10}`") == 2 and "(from `v1` to `HEAD`)" in text
