"""Seed-style tables: the seed's own figures reproduced, as GitHub pipe tables."""

from support import PORT_VS_SOCKET as EXPERIMENT
from support import PORT_VS_SOCKET_RUNS as RUNS

from servelab.report.markdown import render_markdown, seed_table_markdown
from servelab.report.sections import live_sections
from servelab.report.tables import seed_tables


def test_seed_table_reproduces_the_seed_averages_and_difference():
    tables = seed_tables(EXPERIMENT, RUNS)
    assert [(t.variant, t.is_baseline) for t in tables] == [("tcp", True), ("unix", False)]
    base, unix = tables
    assert base.header == ("Test attribute", "Test run 1", "Test run 2", "Test run 3", "Average")
    assert base.rows[0] == ("Requests per second", "1375.63", "1349.77", "1305.75", "1343.72")
    assert unix.header[-1] == "Difference to baseline"
    rps_row = unix.rows[0]
    assert rps_row[-2] == "1348.80"
    assert rps_row[-1] == "+0.38 %"  # the seed printed 0.38 %
    latency_row = unix.rows[1]
    assert latency_row[-2] == "74.157"
    assert latency_row[-1] == "-0.298 ms"  # the seed printed 0.3 ms (an improvement)
    errors_row = next(r for r in unix.rows if r[0] == "Errors")
    assert errors_row[1:] == ("0", "0", "2", "1", "+1")


def test_markdown_table_is_github_pipe_table():
    text = seed_table_markdown(seed_tables(EXPERIMENT, RUNS)[1])
    lines = text.splitlines()
    assert lines[0].startswith("| **Test attribute**")
    assert "Difference to baseline" in lines[0]
    assert set(lines[1]) <= {"|", "-", ":"}
    assert "| Requests per second" in lines[2]
    environment = {"cpu_count": 2, "cpu_plan": {"stack": "0", "driver": "1", "stack_quota": 1.5}}
    document = render_markdown(live_sections(EXPERIMENT, environment, RUNS))
    assert "### sync-small\n\nGET /; closed model" in document
    assert "#### tcp (baseline)" in document
    assert "| CPU placement | stack on CPUs 0, load driver on CPUs 1 |" in document
    assert "| CPU quota     | stack capped at 1.5 CPUs of time       |" in document
    # Three rounds of both variants: the verdicts are paired by round, and say so.
    assert "against the baseline (95 %, Holm-adjusted) come from: paired t-test." in document
    assert "Welch" not in document
    assert "](charts/" not in document and "runs.json" not in document  # live: no files


def test_without_a_comparison_the_report_names_no_test():
    document = render_markdown(live_sections(EXPERIMENT, {}, RUNS[:3]))  # the baseline only
    assert "No verdicts yet: no variant has runs to compare with the baseline's." in document
    assert "No comparison yet" in document and "t-test" not in document


def test_partial_results_render_without_missing_variants():
    tables = seed_tables(EXPERIMENT, RUNS[:2])
    assert [t.variant for t in tables] == ["tcp"]
