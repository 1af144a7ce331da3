"""The results database: ``<root>/servelab.db``, an SQLite file of experiments and runs.

Every experiment (spec, environment, spec hash) and every finished run (the full
RunRecord), one transaction per run, so a crash — even SIGKILL — leaves either the whole
run or none of it. A run is unique per (experiment, variant, workload, repetition):
resuming can never duplicate one. Here too: ``spec_hash``, the fingerprint of what an
experiment measures that ``--resume`` compares, and opening the file read-only. Each
experiment's readable directory is ``servelab.results.store``'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servelab.config.experiment import Experiment
from servelab.errors import ServelabError
from servelab.results.formats import experiment_from, run_from, run_json, spec_record
from servelab.results.records import RunRecord

DB_FILE = "servelab.db"
EXPERIMENT_FILE = "experiment.json"  # in each experiment's directory
SCHEMA_VERSION = 1
APPLICATION_ID = 0x53564C42  # "SVLB": marks the file as servelab's

SCHEMA = """
CREATE TABLE experiments (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    environment_json TEXT NOT NULL,
    export_dir TEXT NOT NULL,  -- the experiment directory (named so in older databases)
    finished_at TEXT
);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id),
    variant TEXT NOT NULL,
    workload TEXT NOT NULL,
    repetition INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    rps REAL NOT NULL,
    errors INTEGER NOT NULL,
    record_json TEXT NOT NULL,
    UNIQUE (experiment_id, variant, workload, repetition)
);
"""


# Spec fields added after --resume began comparing spec hashes, with the value that
# measures as specs from before them did: at that value a field is left out of the hash,
# so that experiments stored before it keep theirs. A field added later joins them.
ADDED_SINCE_HASHING: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("slices",), 1),
    (("side_by_side",), False),
    (("warmup", "duration_s"), None),
    (("baseline", "app", "python"), None),
    (("variants", "*", "app", "python"), None),
    (("driver_options",), {}),
    (("baseline", "proxy", "access_log"), False),
    (("variants", "*", "proxy", "access_log"), False),
    (("switching",), False),
    (("workloads", "*", "replay"), None),
    (("workloads", "*", "load", "schedule"), None),
    (("workloads", "*", "load", "speed"), 1.0),
)


# Fields renamed since hashing began: hashed under their first name.
RENAMED_SINCE_HASHING = {"order_seed": "seed"}


def spec_hash(experiment: Experiment) -> str:
    """A fingerprint of what an experiment measures (resume refuses a changed spec)."""
    spec = experiment.model_dump(mode="json")
    for name, first in RENAMED_SINCE_HASHING.items():
        spec[first] = spec.pop(name)
    # How long to keep measuring is not what is measured: a resume may change it.
    spec.pop("stopping", None)
    for (*tables, key), before in ADDED_SINCE_HASHING:
        for table in _tables(spec, tables):
            if key in table and table[key] == before:
                del table[key]
    canonical = json.dumps(spec, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _tables(spec: dict[str, Any], path: list[str]) -> list[dict[str, Any]]:
    """The tables at ``path`` in ``spec`` ("*": each item of a list)."""
    found: list[Any] = [spec]
    for name in path:
        if name == "*":
            found = [item for value in found if isinstance(value, list) for item in value]
        else:
            found = [value.get(name) for value in found if isinstance(value, dict)]
    return [table for table in found if isinstance(table, dict)]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "experiment"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass(frozen=True)
class ExperimentRow:
    id: int
    name: str
    created_at: str
    finished_at: str | None
    runs: int
    planned: int
    hostname: str
    experiment_dir: str


class Database:
    """servelab's SQLite file; refuses files that are not servelab's, and damaged ones.

    Opened to write (``create``: a session) or to read only: reading needs no write
    access to the file or its directory (a read-only mount, a copy on a CD), and never
    changes the file.
    """

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = path
        if not path.exists() and not create:
            raise ServelabError(
                f"no servelab results database at {path}",
                "run a study first, or pass --results pointing at its directory",
            )
        if create:
            _check_writable(path.parent)
        try:
            if create:
                self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)
                self.conn.execute("PRAGMA foreign_keys = ON")
            else:
                self.conn = _connect_read_only(path)
            self._check_or_create()
        except sqlite3.DatabaseError as exc:
            raise ServelabError(
                f"{path} is not a usable SQLite database ({exc})",
                "point --results at a servelab results directory, or move the file away",
            ) from None
        self._check_intact()

    def _check_intact(self) -> None:
        """A file whose pages are damaged is refused at once, saying what still reads."""
        try:
            problems = [row[0] for row in self.conn.execute("PRAGMA quick_check(5)")]
        except sqlite3.DatabaseError as exc:
            problems = [str(exc)]
        if problems != ["ok"]:
            lines = [s for p in problems for s in p.splitlines() if s and not s.startswith("***")]
            more = f" and {len(lines) - 1} more" if len(lines) > 1 else ""
            raise self._damaged(f"{lines[0] if lines else problems[0]}{more}")

    def _damaged(self, problem: str) -> ServelabError:
        readable = []
        with contextlib.suppress(sqlite3.DatabaseError):
            for id_, stored in self.conn.execute("SELECT id, export_dir FROM experiments"):
                directory = self._beside(stored)
                if Path(directory, EXPERIMENT_FILE).exists():
                    readable.append(f"#{id_} ({directory})")
        keep = (
            f"each experiment's directory holds all its runs: `servelab results show DIR` or "
            f"`servelab report DIR` ({', '.join(readable)})"
            if readable
            else "an experiment's directory (<results>/<id>-<name>) holds all its runs: "
            "`servelab results show DIR`"
        )
        return ServelabError(
            f"{self.path} is damaged (SQLite: {problem})",
            f"{keep}; to save the database itself: `sqlite3 {self.path} .recover | "
            f"sqlite3 recovered.db`; then move the damaged file away",
        )

    def _check_or_create(self) -> None:
        app_id = self.conn.execute("PRAGMA application_id").fetchone()[0]
        tables = self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id == 0 and tables == 0:
            # One script, one transaction: a crash leaves either no schema or all of it.
            self.conn.executescript(
                f"BEGIN;\n{SCHEMA}PRAGMA application_id = {APPLICATION_ID};\n"
                f"PRAGMA user_version = {SCHEMA_VERSION};\nCOMMIT;"
            )
            self.conn.execute("PRAGMA journal_mode = WAL")
            return
        if app_id != APPLICATION_ID:
            raise ServelabError(
                f"{self.path} is an SQLite database, but not servelab's",
                "choose another --results directory",
            )
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            raise ServelabError(
                f"{self.path} has results schema {version}; this servelab reads {SCHEMA_VERSION}",
                "use the servelab version that wrote it, or another --results directory",
            )

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        if self.conn.in_transaction:
            yield self.conn
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()

    # -- experiments ------------------------------------------------------
    def create_experiment(
        self, experiment: Experiment, environment: dict[str, Any], results_root: Path
    ) -> int:
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO experiments (name, created_at, spec_json, spec_hash, "
                "environment_json, export_dir) VALUES (?, ?, ?, ?, ?, '')",
                (
                    experiment.name,
                    _now(),
                    json.dumps(spec_record(experiment)),
                    spec_hash(experiment),
                    json.dumps(environment),
                ),
            )
            experiment_id = int(cursor.lastrowid or 0)
            experiment_dir = results_root / f"{experiment_id}-{_slug(experiment.name)}"
            conn.execute(
                "UPDATE experiments SET export_dir = ? WHERE id = ?",
                (str(experiment_dir.resolve()), experiment_id),
            )
        return experiment_id

    def _row(self, experiment_id: int) -> sqlite3.Row:
        self.conn.row_factory = sqlite3.Row
        try:
            row = self.conn.execute(
                "SELECT * FROM experiments WHERE id = ?", (experiment_id,)
            ).fetchone()
        finally:
            self.conn.row_factory = None
        if row is None:
            raise ServelabError(
                f"no experiment with id {experiment_id} in {self.path}",
                "list them with `servelab results list`",
            )
        return row

    def experiment(self, experiment_id: int) -> Experiment:
        return experiment_from(json.loads(self._row(experiment_id)["spec_json"]))

    def environment(self, experiment_id: int) -> dict[str, Any]:
        return json.loads(self._row(experiment_id)["environment_json"])

    def experiment_dir(self, experiment_id: int) -> Path:
        return self._beside(self._row(experiment_id)["export_dir"])

    def _beside(self, stored: str) -> Path:
        """An experiment's directory: beside this database, under the name it was given
        (the stored absolute path is where it was first written; a results directory
        copied elsewhere, the original gone, reads and writes where it is now)."""
        return self.path.parent.resolve() / Path(stored).name

    def mark_finished(self, experiment_id: int) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE experiments SET finished_at = ? WHERE id = ?", (_now(), experiment_id)
            )

    def forget(self, experiment_id: int) -> None:
        """Remove an experiment that has no run (one refused before it measured)."""
        with self.transaction() as conn:
            (runs,) = conn.execute(
                "SELECT count(*) FROM runs WHERE experiment_id = ?", (experiment_id,)
            ).fetchone()
            if runs:
                raise ValueError(f"experiment {experiment_id} has {runs} runs; it is kept")
            conn.execute("DELETE FROM experiments WHERE id = ?", (experiment_id,))

    def latest_unfinished(self, experiment: Experiment) -> int | None:
        """The newest unfinished experiment of the same name, for --resume."""
        row = self.conn.execute(
            "SELECT id FROM experiments WHERE name = ? AND finished_at IS NULL "
            "ORDER BY id DESC LIMIT 1",
            (experiment.name,),
        ).fetchone()
        return None if row is None else int(row[0])

    def stored_hash(self, experiment_id: int) -> str:
        return str(self._row(experiment_id)["spec_hash"])

    def list_experiments(self) -> list[ExperimentRow]:
        rows = self.conn.execute(
            "SELECT e.id, e.name, e.created_at, e.finished_at, count(r.id), e.spec_json, "
            "e.environment_json, e.export_dir FROM experiments e "
            "LEFT JOIN runs r ON r.experiment_id = e.id GROUP BY e.id ORDER BY e.id"
        ).fetchall()
        listed = []
        for id_, name, created, finished, n_runs, spec_json, env_json, experiment_dir in rows:
            spec = experiment_from(json.loads(spec_json))
            planned = len(spec.stacks) * len(spec.workloads) * spec.repetitions
            host = json.loads(env_json).get("hostname", "?")
            listed.append(
                ExperimentRow(id_, name, created, finished, n_runs, planned, host,
                              str(self._beside(experiment_dir)))
            )
        return listed

    def _identities(self) -> dict[int, tuple[str, ...]]:
        """Each experiment's identity across databases: its name, start, spec hash,
        environment and a digest of its runs (ids differ from one database to another)."""
        import hashlib

        digests: dict[int, Any] = {}
        for experiment_id, record in self.conn.execute(
            "SELECT experiment_id, record_json FROM runs ORDER BY id"
        ):
            digests.setdefault(experiment_id, hashlib.sha256()).update(record.encode())
        return {
            int(row[0]): (*row[1:], digests[row[0]].hexdigest() if row[0] in digests else "")
            for row in self.conn.execute(
                "SELECT id, name, created_at, spec_hash, environment_json FROM experiments"
            )
        }

    def merge_from(self, other: Database) -> tuple[list[tuple[int, int]], int]:
        """Every experiment of ``other`` (another results directory's database) not yet
        here, copied with its runs under a new id, and its directory beside this database
        (its files, the id in experiment.json rewritten). An experiment is here already
        when one with the same identity (``_identities``) is, as many times as ``other``
        has it: merging twice, or merging back a copy, adds nothing. Returns ((their id,
        new id) of each added, how many were already here)."""
        import shutil
        from collections import Counter

        here = Counter(self._identities().values())
        added: list[tuple[int, int]] = []
        skipped = 0
        theirs = other._identities()
        for their_id, identity in sorted(theirs.items()):
            if here[identity] > 0:
                here[identity] -= 1
                skipped += 1
                continue
            (name, created, spec_json, hash_, env_json, their_dir, finished) = other.conn.execute(
                "SELECT name, created_at, spec_json, spec_hash, environment_json, export_dir, "
                "finished_at FROM experiments WHERE id = ?", (their_id,),
            ).fetchone()
            source = other._beside(their_dir)
            written: list[Path] = []  # removed again if the copy or the commit fails
            try:
                new_id = self._merge_one(other, their_id, source, written, (
                    name, created, spec_json, hash_, env_json, finished))
            except BaseException as exc:
                for path in written:
                    shutil.rmtree(path, ignore_errors=True)
                if isinstance(exc, OSError):
                    raise ServelabError(
                        f"could not copy {other.path.parent}'s experiment #{their_id}: "
                        f"{exc.strerror or exc}; the {len(added)} merged before it are kept",
                        "free some space or fix the permissions, then merge again (what is "
                        "here already is not copied twice)",
                    ) from None
                raise
            added.append((their_id, new_id))
        return added, skipped

    def _merge_one(
        self, other: Database, their_id: int, source: Path, written: list[Path],
        row: tuple[Any, ...],
    ) -> int:
        """One experiment of ``other`` added here in one transaction; its directory copied
        under a partial name and renamed once whole (``written``: what is on disk so far,
        for the caller to remove if this fails)."""
        import shutil

        name, created, spec_json, hash_, env_json, finished = row
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO experiments (name, created_at, spec_json, spec_hash, "
                "environment_json, export_dir, finished_at) VALUES (?, ?, ?, ?, ?, '', ?)",
                (name, created, spec_json, hash_, env_json, finished),
            )
            new_id = int(cursor.lastrowid or 0)
            target = self.path.parent.resolve() / f"{new_id}-{_slug(name)}"
            conn.execute("UPDATE experiments SET export_dir = ? WHERE id = ?",
                         (str(target), new_id))
            conn.executemany(
                "INSERT INTO runs (experiment_id, variant, workload, repetition, "
                "started_at, rps, errors, record_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(new_id, *run) for run in other.conn.execute(
                    "SELECT variant, workload, repetition, started_at, rps, errors, "
                    "record_json FROM runs WHERE experiment_id = ? ORDER BY id",
                    (their_id,),
                )],
            )
            if source.is_dir():  # its files (report, profiles), before the commit
                partial = target.with_name(f".{target.name}.partial")
                written.append(partial)
                shutil.copytree(source, partial)
                header = partial / EXPERIMENT_FILE
                if header.is_file():
                    document = json.loads(header.read_text())
                    document["id"] = new_id
                    header.write_text(json.dumps(document, indent=2))
                partial.rename(target)
                written.append(target)
        return new_id

    # -- runs ---------------------------------------------------------------
    def add_run(self, experiment_id: int, run: RunRecord) -> None:
        try:
            with self.transaction() as conn:
                conn.execute(
                    "INSERT INTO runs (experiment_id, variant, workload, repetition, started_at, "
                    "rps, errors, record_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        experiment_id,
                        run.variant,
                        run.workload,
                        run.repetition,
                        run.started_at,
                        run.load.rps,
                        run.load.errors,
                        run_json(run),
                    ),
                )
        except sqlite3.IntegrityError:
            raise ServelabError(
                f"run {run.variant}/{run.workload} #{run.repetition} is already stored",
                "this is a bug in servelab's resume logic; please report it",
            ) from None

    def runs(self, experiment_id: int) -> list[RunRecord]:
        rows = self.conn.execute(
            "SELECT record_json FROM runs WHERE experiment_id = ? ORDER BY id", (experiment_id,)
        ).fetchall()
        try:
            return [run_from(row[0]) for row in rows]
        except ValueError:
            raise ServelabError(
                f"a run record of experiment {experiment_id} is unreadable",
                "the database was written by another servelab version",
            ) from None


def _check_writable(directory: Path) -> None:
    """ServelabError unless results can be written into ``directory`` (made if need be)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ServelabError(
            f"cannot create the results directory {directory}: {exc.strerror}",
            "give --results a directory you can write to",
        ) from None
    from servelab.results.outdir import unwritable

    reason = unwritable(directory, directory=True)
    if reason is not None:
        raise ServelabError(
            f"the results directory {directory} is not writable ({reason})",
            "give --results a directory you can write to",
        )


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """``path`` opened without writing: read-only; on a read-only file system, where a
    WAL database cannot even set up its shared memory, as an immutable file."""
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
    return sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None)
