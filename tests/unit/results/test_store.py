"""The results store: round trips, no run stored twice, copied directories, spec hashes."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import PORT_VS_SOCKET as EXPERIMENT
from support import PORT_VS_SOCKET_RUNS as RUNS
from support import run_cli

from servelab.errors import ServelabError
from servelab.results.database import DB_FILE, Database, spec_hash
from servelab.results.store import RUNS_FILE, ResultStore, resolve_result


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


def test_the_access_log_knob_leaves_the_hash_of_stored_experiments_alone():
    from servelab.prepare.run import with_access_log

    logged = with_access_log(EXPERIMENT, True)
    assert all(stack.proxy.access_log for stack in logged.stacks)
    assert spec_hash(logged) != spec_hash(EXPERIMENT)  # a resume must ask for it again
    assert spec_hash(with_access_log(EXPERIMENT, False)) == spec_hash(EXPERIMENT)
    # Hashed without the knob when off, as before it existed: test_slices' hash of an
    # experiment dumped without the fields added since.


def test_the_access_log_needs_nginx_in_front():
    from servelab.errors import SpecError
    from servelab.prepare.run import with_access_log

    apache = EXPERIMENT.model_copy(update={
        "baseline": EXPERIMENT.baseline.model_copy(update={
            "proxy": EXPERIMENT.baseline.proxy.model_copy(update={"kind": "apache"})
        }),
        "variants": (),
    })
    with pytest.raises(SpecError, match="--access-log is nginx's"):
        with_access_log(apache, True)


def test_store_refuses_foreign_directories(tmp_path: Path):
    with pytest.raises(ServelabError, match="not a servelab results directory"):
        ResultStore.open(tmp_path)


def _stored(root: Path, experiments: int = 2) -> Path:
    """``experiments`` stored experiments of the seed's runs under ``root``; its database."""
    for _ in range(experiments):
        store = ResultStore.create(root, EXPERIMENT, {"hostname": "h"})
        for run in RUNS:
            store.add(run)
        store.database.close()  # type: ignore[union-attr]
    return root / DB_FILE


def test_a_damaged_database_is_one_line_naming_what_still_reads(tmp_path: Path):
    db = _stored(tmp_path)
    data = bytearray(db.read_bytes())
    for page in (2, 3):  # b-tree page headers: the file header stays valid
        data[page * 4096 : page * 4096 + 64] = b"Z" * 64
    db.write_bytes(data)
    for args in (["results", "list"], ["results", "show", "1"], ["report", "1"]):
        done = run_cli(*args, "--results", str(tmp_path))
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert f"{db} is damaged (SQLite: " in line and ".recover" in line
        assert f"#1 ({tmp_path / '1-port-vs-socket'})" in line  # what still reads, and where
    shown = run_cli("results", "show", str(tmp_path / "2-port-vs-socket"))
    assert shown.returncode == 0 and "sync-small" in shown.stdout  # the directory alone reads


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root")
def test_results_on_a_read_only_mount_can_be_read(tmp_path: Path):
    """The store opened only to read needs no write access: a private read-only bind
    mount of the results (in a mount namespace of its own, gone with the process)."""
    root = tmp_path / "results"
    _stored(root, experiments=1)
    servelab = [sys.executable, "-m", "servelab"]
    script = (
        f"mount --bind {root} {root} && mount -o remount,bind,ro {root} && "
        f"! touch {root}/probe 2>/dev/null && "
        f"{shlex.join([*servelab, 'results', 'list', '--results', str(root)])} && "
        f"{shlex.join([*servelab, 'results', 'show', '1', '--results', str(root)])} && "
        # writing there is refused before anything starts, in one line, exit code 2
        f"{{ {shlex.join([*servelab, 'study', 'quick', '--results', str(root)])}; "
        f"test $? -eq 2; }}"
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "port-vs-socket" in done.stdout and "Seed-style tables" in done.stdout
    assert f"--results {root}: cannot write there (Read-only file system)" in done.stderr
