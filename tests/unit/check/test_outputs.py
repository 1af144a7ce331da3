"""What CI shows of a check: the markdown summary and JUnit XML (checked against the
JUnit format's schema)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from support import github_outputs, run_cli

from servelab.analysis.stats import Comparison
from servelab.analysis.thresholds import exit_code, judge, overall, parse_threshold
from servelab.check import CheckOutcome
from servelab.check.outputs import (
    append_step_outputs,
    junit_xml,
    step_outputs,
    summary_markdown,
    write_error,
    write_outputs,
)

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
        Path("/tmp/r/1-check"), 4, "nested t-test over stack starts", 95.0, budget_s=180.0,
    )


def test_a_passing_check_in_markdown() -> None:
    text = summary_markdown(outcome(-2.0, 1.0, 0))
    assert text.startswith("### servelab check: ✅ passed: no threshold crossed\n")
    assert "| threshold | verdict | change | 95 % interval |" in text  # one workload: no column
    assert "| `rps < -5%` | ✅ held | -0.5 % | -2.0 % … +1.0 % |" in text
    assert "| `errors > 0` | ✅ held | 0 | — |" in text
    assert "against baseline `main at 1a2b3c4d5e`: 4 fresh starts of each" in text
    assert "took 95 s of a 3m budget; exit code 0" in text
    assert "Report: `servelab report /tmp/r/1-check` (its result directory)." in text
    assert "undecided" not in text


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
    output = tmp_path / "github-output"
    output.write_text("earlier=step\n")
    written = write_outputs(checked, tmp_path / "s.md", tmp_path / "j.xml", str(step),
                            github_output=str(output))
    assert written == [tmp_path / "s.md", step, output, tmp_path / "j.xml"]
    outputs = github_outputs(output.read_text())
    assert outputs["earlier"] == "step"  # appended to, as the runner's file is
    assert (outputs["verdict"], outputs["exit-code"]) == ("crossed", "1")
    assert outputs["summary"] == summary_markdown(checked)
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


def test_step_outputs_give_each_thresholds_change_with_its_interval(tmp_path: Path) -> None:
    checked = outcome(-12.0, -8.0, 0)
    outputs = step_outputs(checked)
    assert outputs["changes"].splitlines() == [
        "rps < -5%: -10.0 % (95 % interval -12.0 % … -8.0 %), crossed",
        "errors > 0: 0, held",
    ]
    rps, errors = json.loads(outputs["thresholds"])
    assert rps == {"threshold": "rps < -5%", "workload": "app", "verdict": "crossed",
                   "change": -10.0, "unit": "%", "low": -12.0, "high": -8.0}
    assert (errors["change"], errors["unit"], errors["low"]) == (0, "count", None)
    assert outputs["result-dir"] == str(checked.result_dir)
    # As the runner reads the file: every value back, the multiline ones whole.
    path = tmp_path / "out"
    append_step_outputs(path, outputs)
    assert github_outputs(path.read_text()) == outputs


def test_a_delimiter_is_never_a_line_of_the_value(tmp_path: Path, monkeypatch) -> None:
    from servelab.check import outputs as module

    tokens = iter(["aaaa", "bbbb"])
    monkeypatch.setattr(module.secrets, "token_hex", lambda n: next(tokens))
    path = tmp_path / "out"
    append_step_outputs(path, {"text": "one\nservelab_aaaa\ntwo"})
    assert github_outputs(path.read_text()) == {"text": "one\nservelab_aaaa\ntwo"}
    assert "text<<servelab_bbbb\n" in path.read_text()


def test_an_undecided_threshold_says_how_to_decide_it() -> None:
    text = summary_markdown(outcome(-7.0, -2.0, 0))  # straddles -5 %, centre 0.5 % away
    [line] = [line for line in text.splitlines() if "undecided" in line]
    assert line.startswith("- `rps < -5%` is undecided: its interval (-7.0 % … -2.0 %) "
                           "straddles -5 %. To decide it: ")
    # A half-width of 2.5 at 0.5 from the limit: 25 times the rounds, past what a budget
    # decides in reasonable time; nearer the interval's edge, a budget it names.
    assert "decides it slowly" in line
    assert "`--fail-if 'instructions > +5%'`" in line and "noisy runner" in line
    text = summary_markdown(outcome(-8.0, -4.0, 0))  # half-width 2, 1 from the limit: 4x
    assert "about `--budget 12m`" in text


def test_a_check_that_cannot_run_says_its_line_where_ci_looks(tmp_path: Path) -> None:
    step, output, summary = tmp_path / "step.md", tmp_path / "output", tmp_path / "s.md"
    line = "invalid threshold 'rps <<< 5' (fix: see `servelab check --help` for --fail-if)"
    write_error(line, 2, summary, str(step), str(output))
    assert summary.read_text() == step.read_text() == (
        f"### servelab check: ⛔ could not run\n\n{line}\n"
    )
    assert github_outputs(output.read_text()) == {"verdict": "error", "exit-code": "2",
                                                   "error": line}
    write_error(line, 2, tmp_path / "no" / "dir.md", None, None)  # unwritable: no traceback


@pytest.mark.parametrize(("args", "said"), [
    (["--fail-if", "rps <<< 5"], "invalid threshold 'rps <<< 5'"),
    (["--budget", "soon"], "invalid duration 'soon'"),  # refused by the run options' parser
])
def test_bad_input_is_one_line_in_the_log_and_in_githubs_summary(
    tmp_path: Path, args: list[str], said: str
) -> None:
    step, output = tmp_path / "step.md", tmp_path / "output"
    done = run_cli("check", "--app", "sleepy", *args,
                   env={"GITHUB_STEP_SUMMARY": str(step), "GITHUB_OUTPUT": str(output)})
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("servelab: error: ") and said in line
    assert step.read_text() == f"### servelab check: ⛔ could not run\n\n{line[17:]}\n"
    assert github_outputs(output.read_text())["verdict"] == "error"


def test_a_value_of_several_lines_is_a_threshold_per_line() -> None:
    from servelab.cli.check import threshold_lines

    assert threshold_lines(("rps < -5%\n\n  errors > 0  \n", "p99 > +10%")) == (
        "rps < -5%", "errors > 0", "p99 > +10%",
    )
    assert threshold_lines(("", "\n")) == ()  # an empty CI input: the defaults
    done = run_cli("check", "--app", "sleepy", "--fail-if", "rps < -5%\nrps <= 5")
    assert done.returncode == 2 and "invalid threshold 'rps <= 5'" in done.stderr
