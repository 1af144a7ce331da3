"""The results store: round trips, no run stored twice, copied directories, spec hashes."""

import shutil
from pathlib import Path

import pytest
from support import PORT_VS_SOCKET as EXPERIMENT
from support import PORT_VS_SOCKET_RUNS as RUNS

from servelab.errors import ServelabError
from servelab.results.store import (
    DB_FILE,
    RUNS_FILE,
    Database,
    ResultStore,
    resolve_result,
    spec_hash,
)


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
