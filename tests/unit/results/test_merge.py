"""Merging two results directories (a CI artifact into a laptop's): every experiment
copied once with its runs and files, under new ids; merging again adds nothing; the
merged experiments read as they did; the other directory is only read."""

from __future__ import annotations

import hashlib
from pathlib import Path

from support import PORT_VS_SOCKET, PORT_VS_SOCKET_RUNS, run_cli

from servelab.results.database import DB_FILE, Database
from servelab.results.store import ResultStore


def _store(root: Path, host: str) -> ResultStore:
    store = ResultStore.create(root, PORT_VS_SOCKET, {"hostname": host})
    for run in PORT_VS_SOCKET_RUNS:
        store.add(run)
    store.mark_finished()
    (store.path / "report.md").write_text(f"# from {host}\n")
    # Closed here, not when the garbage collector gets to it: an open connection keeps
    # SQLite's -wal and -shm files beside the database, which the listings below see.
    assert store.database is not None
    store.database.close()
    return store


def _digest(root: Path) -> str:
    """What a results directory holds: its experiments' files, and its database's rows
    (SQLite may fold its write-ahead log into the file when it is read: same rows)."""
    files = b"".join(p.read_bytes() for p in sorted(root.rglob("*"))
                     if p.is_file() and not p.name.startswith(DB_FILE))
    database = Database(root / DB_FILE)
    rows = repr([(r, database.runs(r.id)) for r in database.list_experiments()])
    database.close()
    return hashlib.sha256(files + rows.encode()).hexdigest()


def test_merge_copies_once_and_reads_the_same(tmp_path: Path) -> None:
    laptop, ci = tmp_path / "laptop", tmp_path / "ci"
    _store(laptop, "laptop")
    _store(ci, "ci-1")
    _store(ci, "ci-1")
    before = _digest(ci)
    done = run_cli("results", "merge", str(ci), "--results", str(laptop))
    assert done.returncode == 0, done.stderr
    assert "merged 2 experiment(s)" in done.stdout and "0 already there" in done.stdout
    assert _digest(ci) == before  # only read
    database = Database(laptop / DB_FILE)
    rows = database.list_experiments()
    assert [(r.id, r.hostname, r.runs) for r in rows] == [
        (1, "laptop", 6), (2, "ci-1", 6), (3, "ci-1", 6),
    ]
    merged = ResultStore.open(Path(rows[1].experiment_dir))
    assert merged.id == 2 and merged.runs() == PORT_VS_SOCKET_RUNS
    assert (Path(rows[2].experiment_dir) / "report.md").read_text() == "# from ci-1\n"
    database.close()
    again = run_cli("results", "merge", str(ci), "--results", str(laptop))
    assert "merged 0 experiment(s)" in again.stdout and "2 already there" in again.stdout
    # Merged back the other way: the laptop's one is new there, the CI's are not.
    back = run_cli("results", "merge", str(laptop), "--results", str(ci))
    assert "merged 1 experiment(s)" in back.stdout and "2 already there" in back.stdout


def test_merging_nothing_or_itself_is_one_line(tmp_path: Path) -> None:
    _store(tmp_path / "a", "a")
    for args, said in (
        (["results", "merge", str(tmp_path / "none"), "--results", str(tmp_path / "a")],
         "none"),
        (["results", "merge", str(tmp_path / "a"), "--results", str(tmp_path / "a")],
         "is --results itself"),
    ):
        done = run_cli(*args)
        assert done.returncode == 2, done.stderr
        assert said in done.stderr and "Traceback" not in done.stderr


def test_a_copy_that_fails_leaves_nothing_of_that_experiment(
    tmp_path: Path, monkeypatch
) -> None:
    import shutil

    laptop, ci = tmp_path / "laptop", tmp_path / "ci"
    _store(laptop, "laptop")
    _store(ci, "ci-1")
    _store(ci, "ci-2")
    before = sorted(p.name for p in laptop.iterdir() if not p.name.startswith(DB_FILE))
    copy = shutil.copytree
    calls = []

    def copy_then_fail(source, target, *args, **kwargs):  # the disk fills on the second
        calls.append(target)
        copy(source, target, *args, **kwargs)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return target

    monkeypatch.setattr(shutil, "copytree", copy_then_fail)
    done = run_cli("results", "merge", str(ci), "--results", str(laptop))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "No space left on device; the 1 merged before it are kept" in done.stderr
    database = Database(laptop / DB_FILE)
    assert [r.hostname for r in database.list_experiments()] == ["laptop", "ci-1"]
    database.close()
    # SQLite's own files beside the database (-wal, -shm) come and go with connections
    # (a read-only one leaves them); what matters is that no partial experiment is left.
    after = sorted(p.name for p in laptop.iterdir() if not p.name.startswith(DB_FILE))
    assert [p for p in after if p not in before] == ["2-port-vs-socket"]  # no partial left
    monkeypatch.setattr(shutil, "copytree", copy)
    again = run_cli("results", "merge", str(ci), "--results", str(laptop))
    assert "merged 1 experiment(s)" in again.stdout and "1 already there" in again.stdout
