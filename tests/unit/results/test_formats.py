"""Stored record formats: numbered when written, brought to the current shape when read."""

import json
import sqlite3
from pathlib import Path

import pytest
from support import PORT_VS_SOCKET as EXPERIMENT
from support import PORT_VS_SOCKET_RUNS as RUNS

from servelab.errors import ServelabError
from servelab.prepare.building import experiment_from_dict
from servelab.results.database import DB_FILE, EXPERIMENT_FILE, Database, spec_hash
from servelab.results.formats import (
    FORMAT_KEY,
    RUN,
    SPEC,
    RecordFormat,
    experiment_from,
    run_from,
    run_json,
)
from servelab.results.records import RunRecord
from servelab.results.store import RUNS_FILE, ResultStore, resolve_result

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "results"
# What spec_hash gave for these before formats were numbered: --resume compares it with
# the hash an unfinished experiment was stored with.
HASHES = {
    "quick": "ed18fe993fedfa7a",
    "workers-threads": "ad39db6aaac249aa",
    "rate-steps": "31ff5770f9d0c3e8",
    "sleepy-workers": "78a198d4404f1b34",
}


@pytest.mark.parametrize("name", sorted(HASHES))
def test_results_stored_before_formats_were_numbered_read_in_the_current_shape(name):
    store = ResultStore.open(FIXTURES / name)
    stored = [json.loads(line) for line in (FIXTURES / name / RUNS_FILE).read_text().splitlines()]
    assert all(FORMAT_KEY not in record and "slice_figures" not in record for record in stored)
    runs = store.runs()
    assert len(runs) == len(stored)
    for run in runs:  # fields added since then read as what those runs were
        assert run.slices == 1 and run.slice_figures == () and run.cpu_speed is None
    assert store.experiment.slices == 1 and store.experiment.stopping is None
    assert spec_hash(store.experiment) == HASHES[name]


def test_the_spec_hash_leaves_out_only_what_measures_as_before():
    spec = {
        "name": "sbs",
        "repetitions": 2,
        "baseline": {"name": "base"},
        "variants": [{"name": "fast", "proxy": {"transport": "unix"}}],
        "workloads": [{"name": "w", "load": {"duration_s": 2}}],
        "side_by_side": True,
        "stopping": {"precision_pct": 50, "budget_s": 60},
        "warmup": {"duration_s": 1.0},
    }
    # Switched passes where it measures in turns (a new experiment's default since
    # issue 34: it measures otherwise than one built before, and its hash says so) ...
    assert spec_hash(experiment_from_dict(spec)) == "45ce8a361f52320e"
    # ... and without them, the hash it had before they existed.
    anew = experiment_from_dict({**spec, "switching": False})
    assert spec_hash(anew) == "33d35a828f272ada"
    # How long to keep measuring is not what is measured.
    longer = experiment_from_dict({**spec, "stopping": {"precision_pct": 1, "budget_s": 600}})
    assert spec_hash(longer) == "45ce8a361f52320e"


def test_every_record_is_stored_with_its_format_and_reads_back(tmp_path: Path):
    store = ResultStore.create(tmp_path, EXPERIMENT, {})
    for run in RUNS:
        store.add(run)
    lines = (store.path / RUNS_FILE).read_text().splitlines()
    assert [json.loads(line)[FORMAT_KEY] for line in lines] == [RUN.number] * len(RUNS)
    document = json.loads((store.path / EXPERIMENT_FILE).read_text())
    assert document["experiment"][FORMAT_KEY] == SPEC.number
    database = sqlite3.connect(tmp_path / DB_FILE)
    (spec_json,) = database.execute("SELECT spec_json FROM experiments").fetchone()
    assert json.loads(spec_json)[FORMAT_KEY] == SPEC.number
    for (record_json,) in database.execute("SELECT record_json FROM runs"):
        assert json.loads(record_json)[FORMAT_KEY] == RUN.number
    database.close()
    assert resolve_result("1", tmp_path).runs() == RUNS
    assert resolve_result("1", tmp_path).experiment == EXPERIMENT
    copy = ResultStore(store.path)  # the experiment directory alone
    assert copy.runs() == RUNS and copy.experiment == EXPERIMENT


def test_a_database_written_before_formats_were_numbered_still_opens(tmp_path: Path):
    ResultStore.create(tmp_path, EXPERIMENT, {}).add(RUNS[0])
    database = sqlite3.connect(tmp_path / DB_FILE)
    with database:
        database.execute("UPDATE experiments SET spec_json = ?", (EXPERIMENT.model_dump_json(),))
        database.execute("UPDATE runs SET record_json = ?", (RUNS[0].model_dump_json(),))
    database.close()
    reopened = Database(tmp_path / DB_FILE)
    assert reopened.experiment(1) == EXPERIMENT
    assert reopened.runs(1) == [RUNS[0]]
    assert [row.planned for row in reopened.list_experiments()] == [6]


def test_a_record_from_a_newer_servelab_is_refused_by_its_format(tmp_path: Path):
    store = ResultStore.create(tmp_path, EXPERIMENT, {})
    newer = {FORMAT_KEY: RUN.number + 1, **RUNS[0].model_dump(mode="json")}
    (store.path / RUNS_FILE).write_text(json.dumps(newer) + "\n")
    with pytest.raises(ServelabError, match=f"format {RUN.number + 1}; this servelab reads"):
        ResultStore(store.path).runs()


def test_upgrades_run_in_order_from_the_format_a_record_was_written_in():
    def renamed(record):  # format 1 -> 2: "rate" became "rps"
        return {**{k: v for k, v in record.items() if k != "rate"}, "rps": record["rate"]}

    def doubled(record):  # format 2 -> 3: rps counted in pairs
        return {**record, "rps": 2 * record["rps"]}

    runs = RecordFormat("run", (renamed, doubled))
    assert runs.number == 3 and runs.stamped({"rps": 1})[FORMAT_KEY] == 3
    assert runs.current({"rate": 5}) == {"rps": 10}  # not numbered: format 1
    assert runs.current({FORMAT_KEY: 1, "rate": 5}) == {"rps": 10}
    assert runs.current({FORMAT_KEY: 2, "rps": 5}) == {"rps": 10}
    assert runs.current({FORMAT_KEY: 3, "rps": 5}) == {"rps": 5}
    with pytest.raises(ServelabError, match="format 0"):
        runs.current({FORMAT_KEY: 0, "rps": 5})
    with pytest.raises(ValueError, match="JSON object"):
        runs.current([1, 2])


def test_a_stored_run_reads_back_as_the_same_record():
    run = RUNS[0].model_copy(update={"notes": ("ü: not ASCII",), "log_events": {"x": 1}})
    assert run_from(run_json(run)) == run
    assert isinstance(run_from(run_json(run)), RunRecord)


def test_format_1_specs_name_the_random_orders_seed_seed_and_keep_their_hash():
    shuffled = EXPERIMENT.model_copy(update={"order": "random", "order_seed": 7})
    old = shuffled.model_dump(mode="json")
    old["seed"] = old.pop("order_seed")  # how format 1 stored it
    assert SPEC.number == 2
    upgraded = SPEC.current({FORMAT_KEY: 1, **old})
    assert "seed" not in upgraded and upgraded["order_seed"] == 7
    assert experiment_from({FORMAT_KEY: 1, **old}) == shuffled
    # The seed is still part of what is measured (the fixtures' pinned hashes above show
    # the rename left every stored hash as it was).
    assert spec_hash(shuffled) != spec_hash(shuffled.model_copy(update={"order_seed": 8}))
