"""What CI shows of a check: the markdown summary and JUnit XML (checked against the
JUnit format's schema)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from servelab.analysis.stats import Comparison
from servelab.analysis.thresholds import exit_code, judge, overall, parse_threshold
from servelab.check import CheckOutcome
from servelab.check.outputs import junit_xml, summary_markdown, write_outputs

SCHEMA = xmlschema.XMLSchema(
    Path(__file__).resolve().parents[2] / "fixtures" / "schemas" / "junit.xsd"
)


def outcome(low: float, high: float, errors: float, inconclusive: str = "fail") -> CheckOutcome:
    change = (low + high) / 2
    comparison = Comparison(100.0, 100.0 + change, change, change, (low, high), 0.01, "", "")
    judgements = (
        judge(parse_threshold("rps < -5%"), comparison, errors, "app"),
        judge(parse_threshold("errors > 0"), None, errors, "app"),
    )
    state = overall(judgements)
    return CheckOutcome(
        judgements, state, exit_code(state, inconclusive), "main at 1a2b3c4d5e", "/src/app",
        Path("/tmp/r/1-check"), 4, "nested t-test over stack starts", 95.0,
    )


def test_a_passing_check_in_markdown() -> None:
    text = summary_markdown(outcome(-2.0, 1.0, 0))
    assert text.startswith("### servelab check: ✅ passed: no threshold crossed\n")
    assert "| `rps < -5%` | app | -0.5 % | -2.0 % … +1.0 % | ✅ held |" in text
    assert "| `errors > 0` | app | 0 | — | ✅ held |" in text
    assert "against baseline `main at 1a2b3c4d5e`, 4 fresh starts of each" in text
    assert "exit code 0" in text


@pytest.mark.parametrize(
    ("low", "high", "errors", "inconclusive", "failures", "skipped"),
    [
        (-2.0, 1.0, 0, "fail", 0, 0),  # passed
        (-12.0, -8.0, 0, "fail", 1, 0),  # rps crossed
        (-2.0, 1.0, 3, "fail", 1, 0),  # errors crossed
        (-7.0, -2.0, 0, "fail", 1, 0),  # inconclusive, failing the check
        (-7.0, -2.0, 0, "pass", 0, 1),  # inconclusive, passing: skipped
    ],
)
def test_junit_is_valid_and_counts_what_failed(low, high, errors, inconclusive, failures,
                                               skipped) -> None:
    xml = junit_xml(outcome(low, high, errors, inconclusive))
    SCHEMA.validate(xml)
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    assert suite.get("tests") == "2"
    assert (suite.get("failures"), suite.get("skipped")) == (str(failures), str(skipped))
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["rps < -5%", "errors > 0"]
    assert sum(c.find("failure") is not None for c in cases) == failures


def test_an_invalid_report_would_be_caught_by_the_schema() -> None:
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        SCHEMA.validate('<testsuites><testsuite name="x"><testcase/></testsuite></testsuites>')


def test_outputs_are_written_and_appended_to_githubs_summary(tmp_path: Path) -> None:
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n")
    checked = outcome(-12.0, -8.0, 0)
    written = write_outputs(checked, tmp_path / "s.md", tmp_path / "j.xml", str(step))
    assert written == [tmp_path / "s.md", step, tmp_path / "j.xml"]
    assert step.read_text() == "earlier step\n" + summary_markdown(checked)
    assert "❌ failed" in (tmp_path / "s.md").read_text()
    SCHEMA.validate(str(tmp_path / "j.xml"))


def test_a_profiled_check_names_the_functions_in_its_summary() -> None:
    from dataclasses import replace

    why = ("candidate vs baseline (app): stack CPU 700.0 vs 500.0 µs/request, +200.0",
           "  +190.0 µs/request (95 % +150.0 to +230.0) in slow_path (app.py)")
    text = summary_markdown(replace(outcome(-12.0, -8.0, 0), why=why))
    assert "Where the CPU per request went (`--profile`" in text
    assert "```\n" + "\n".join(why) + "\n```" in text
    assert "Where the CPU" not in summary_markdown(outcome(-12.0, -8.0, 0))


def test_the_flame_graph_is_written_beside_the_outputs_and_named(tmp_path: Path) -> None:
    from dataclasses import replace

    from servelab.check.outputs import FLAME_FILE, flame_path

    checked = replace(outcome(-12.0, -8.0, 0), flame_svg="<svg>slow_path</svg>")
    summary, junit = tmp_path / "out" / "s.md", tmp_path / "j.xml"
    summary.parent.mkdir()
    assert flame_path(checked, summary, junit) == tmp_path / "out" / FLAME_FILE
    assert flame_path(checked, None, junit) == tmp_path / FLAME_FILE
    assert flame_path(checked, None, None) == checked.result_dir / FLAME_FILE
    assert flame_path(outcome(-12.0, -8.0, 0), summary, junit) is None  # none drawn
    step = tmp_path / "step.md"
    flame = flame_path(checked, summary, junit)
    written = write_outputs(checked, summary, junit, str(step), flame)
    assert written[0] == flame and flame.read_text() == "<svg>slow_path</svg>"
    for text in (summary.read_text(), step.read_text(), summary_markdown(checked, flame)):
        assert f"Differential flame graph (red where the candidate's CPU per request grew, " \
               f"blue where it shrank): `{flame}`" in text
    assert "Differential flame graph" not in summary_markdown(checked)
