import shutil
from pathlib import Path

import pytest
from support import PORT_VS_SOCKET, PORT_VS_SOCKET_RUNS

from servelab.errors import ServelabError
from servelab.measure.plan import plan_launches
from servelab.report.markdown import render_markdown, seed_table_markdown
from servelab.report.sections import live_sections
from servelab.report.tables import seed_tables
from servelab.results.store import (
    DB_FILE,
    RUNS_FILE,
    Database,
    ResultStore,
    resolve_result,
    spec_hash,
)

EXPERIMENT, RUNS = PORT_VS_SOCKET, PORT_VS_SOCKET_RUNS


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
    assert "against the baseline (95 %) come from: paired t-test." in document
    assert "Welch" not in document
    assert "](charts/" not in document and "runs.json" not in document  # live: no files


def test_without_a_comparison_the_report_names_no_test():
    document = render_markdown(live_sections(EXPERIMENT, {}, RUNS[:3]))  # the baseline only
    assert "No verdicts yet: no variant has runs to compare with the baseline's." in document
    assert "No comparison yet" in document and "t-test" not in document


def test_partial_results_render_without_missing_variants():
    tables = seed_tables(EXPERIMENT, RUNS[:2])
    assert [t.variant for t in tables] == ["tcp"]


def test_store_round_trip_through_the_database(tmp_path: Path):
    store = ResultStore.create(tmp_path, EXPERIMENT, {"cpu_count": 2})
    assert store.id == 1 and store.path == (tmp_path / "1-port-vs-socket").resolve()
    for result in RUNS:
        store.add(result)
    reopened = resolve_result("1", tmp_path)
    assert reopened.experiment == EXPERIMENT
    assert reopened.environment == {"cpu_count": 2}
    assert reopened.runs() == RUNS
    assert ResultStore.open(store.path).runs() == RUNS  # the export dir finds its database
    database = Database(tmp_path / DB_FILE)
    assert database.latest_unfinished(EXPERIMENT) == 1
    assert database.stored_hash(1) == spec_hash(EXPERIMENT)
    store.mark_finished()
    assert database.latest_unfinished(EXPERIMENT) is None
    (row,) = database.list_experiments()
    assert (row.id, row.runs, row.planned) == (1, 6, 6)


def test_a_run_is_never_stored_twice(tmp_path: Path):
    store = ResultStore.create(tmp_path, EXPERIMENT, {})
    store.add(RUNS[0])
    with pytest.raises(ServelabError, match="already stored"):
        store.add(RUNS[0])
    assert store.runs() == [RUNS[0]]
    assert (store.path / RUNS_FILE).read_text().count("\n") == 1


def test_copied_experiment_directory_opens_read_only(tmp_path: Path):
    store = ResultStore.create(tmp_path / "a", EXPERIMENT, {})
    for result in RUNS:
        store.add(result)
    copy = tmp_path / "copy"
    shutil.copytree(store.path, copy)
    # A run cut off mid-write (no newline) is ignored; the finished ones stay.
    with open(copy / RUNS_FILE, "a") as runs:
        runs.write(RUNS[0].model_dump_json()[:40])
    opened = ResultStore.open(copy)
    assert opened.database is None
    assert opened.runs() == RUNS
    with pytest.raises(ServelabError, match="read-only"):
        opened.add(RUNS[0])


def test_spec_hash_changes_with_the_spec():
    assert spec_hash(EXPERIMENT) == spec_hash(EXPERIMENT.model_copy())
    assert spec_hash(EXPERIMENT) != spec_hash(EXPERIMENT.model_copy(update={"repetitions": 4}))


def test_store_refuses_foreign_directories(tmp_path: Path):
    with pytest.raises(ServelabError, match="not a servelab results directory"):
        ResultStore.open(tmp_path)


def test_plan_is_interleaved_and_random_order_is_reproducible():
    plan = plan_launches(EXPERIMENT)
    assert [(p.repetition, p.stack.name) for p in plan] == [
        (1, "tcp"),
        (1, "unix"),
        (2, "tcp"),
        (2, "unix"),
        (3, "tcp"),
        (3, "unix"),
    ]
    shuffled = EXPERIMENT.model_copy(update={"order": "random", "order_seed": 7})
    first, second = plan_launches(shuffled), plan_launches(shuffled)
    assert first == second
    assert sorted((p.repetition, p.stack.name) for p in first) == sorted(
        (p.repetition, p.stack.name) for p in plan
    )


def test_warmup_settles_when_two_rounds_agree():
    from servelab.measure.plan import warmup_settled

    assert not warmup_settled([], 5.0)
    assert not warmup_settled([900.0], 5.0)
    assert not warmup_settled([600.0, 900.0], 5.0)  # still climbing: +50 %
    assert warmup_settled([600.0, 900.0, 930.0], 5.0)  # +3.3 %
    assert not warmup_settled([900.0, 1000.0], 5.0)  # exactly +11 %
    assert not warmup_settled([0.0, 0.0], 5.0)
