"""The results store: one experiment's results, in the results database
(``servelab.results.database``) and mirrored to a readable experiment directory.

``<root>/<id>-<name>/`` holds ``experiment.json``, ``runs.jsonl`` and the reports,
rewritten after every run for people and other tools; with ``--profile``, each run's
folded stacks under ``profiles/`` (``servelab.results.profiles``). A copied experiment
directory can be opened on its own (read-only). ``resolve_result`` finds a result as users
name it: an id in the database or an experiment directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from servelab.config.experiment import Experiment
from servelab.errors import ServelabError
from servelab.results.database import DB_FILE, EXPERIMENT_FILE, Database
from servelab.results.formats import experiment_from, run_from, run_json, spec_record
from servelab.results.profiles import write_profile
from servelab.results.records import RunRecord

RUNS_FILE = "runs.jsonl"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class ResultStore:
    """One experiment's results: in the database, mirrored to its experiment directory."""

    def __init__(
        self, path: Path, database: Database | None = None, experiment_id: int | None = None
    ) -> None:
        self.path = path  # the experiment directory
        self.database = database
        self.id = experiment_id

    @classmethod
    def create(cls, root: Path, experiment: Experiment, environment: dict[str, Any]) -> ResultStore:
        database = Database(root / DB_FILE, create=True)
        experiment_id = database.create_experiment(experiment, environment, root)
        store = cls(database.experiment_dir(experiment_id), database, experiment_id)
        store._write_mirror_header(experiment, environment)
        (store.path / RUNS_FILE).touch()
        return store

    @classmethod
    def from_database(cls, database: Database, experiment_id: int) -> ResultStore:
        database.experiment(experiment_id)  # raises for an unknown id
        return cls(database.experiment_dir(experiment_id), database, experiment_id)

    @classmethod
    def open(cls, path: Path) -> ResultStore:
        """An experiment directory: backed by its database when that is still beside it."""
        document = cls._read_mirror(path)
        experiment_id = document.get("id")
        db_path = path.parent / DB_FILE
        if isinstance(experiment_id, int) and db_path.exists():
            try:  # a damaged database beside it: the directory alone still reads
                database = Database(db_path)
            except ServelabError:
                return cls(path)
            with contextlib.suppress(ServelabError):
                if database.experiment_dir(experiment_id) == path.resolve():
                    return cls(path, database, experiment_id)
            database.close()
        return cls(path)

    @staticmethod
    def _read_mirror(path: Path) -> dict[str, Any]:
        if not (path / EXPERIMENT_FILE).is_file():
            raise ServelabError(
                f"{path} is not a servelab results directory (no {EXPERIMENT_FILE})",
                "pass a result id (`servelab results list`) or a directory servelab wrote",
            )
        try:
            return json.loads((path / EXPERIMENT_FILE).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ServelabError(
                f"{path / EXPERIMENT_FILE} is unreadable ({exc})",
                "the experiment directory is damaged; open the result by id instead",
            ) from None

    def _write_mirror_header(self, experiment: Experiment, environment: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        document = {
            "id": self.id,
            "experiment": spec_record(experiment),
            "environment": environment,
        }
        _write_atomic(self.path / EXPERIMENT_FILE, json.dumps(document, indent=2))

    @property
    def experiment(self) -> Experiment:
        if self.database is not None and self.id is not None:
            return self.database.experiment(self.id)
        try:
            return experiment_from(self._read_mirror(self.path)["experiment"])
        except (ValueError, KeyError):
            raise ServelabError(
                f"{self.path / EXPERIMENT_FILE} does not hold an experiment this servelab reads",
                "open it with the servelab version that wrote it",
            ) from None

    @property
    def environment(self) -> dict[str, Any]:
        if self.database is not None and self.id is not None:
            return self.database.environment(self.id)
        return self._read_mirror(self.path).get("environment", {})

    @property
    def label(self) -> str:
        return f"#{self.id} ({self.path})" if self.id is not None else str(self.path)

    def add(self, run: RunRecord) -> None:
        """Store one finished run: the database first (atomic), then its directory's files."""
        if self.database is None or self.id is None:
            raise ServelabError(f"{self.path} was opened read-only", "run a new experiment")
        self.database.add_run(self.id, run)
        with open(self.path / RUNS_FILE, "a") as runs:
            runs.write(run_json(run) + "\n")
            runs.flush()
            os.fsync(runs.fileno())

    def write_profile(self, relative: str, stacks: dict[str, int]) -> None:
        """A run's folded stacks (``--profile``), written before the run that names them."""
        write_profile(self.path, relative, stacks)

    def mark_finished(self) -> None:
        if self.database is not None and self.id is not None:
            self.database.mark_finished(self.id)

    def discard(self) -> None:
        """Remove this experiment, which stored no run, from the database and the disk."""
        if self.database is not None and self.id is not None:
            self.database.forget(self.id)
        shutil.rmtree(self.path, ignore_errors=True)

    def runs(self) -> list[RunRecord]:
        if self.database is not None and self.id is not None:
            return self.database.runs(self.id)
        results = []
        with open(self.path / RUNS_FILE) as runs:
            for number, line in enumerate(runs, 1):
                if not line.strip():
                    continue
                try:
                    results.append(run_from(line))
                except ValueError:
                    if not line.endswith("\n"):
                        break  # a run cut off mid-write by a crash: not a finished run
                    raise ServelabError(
                        f"{self.path / RUNS_FILE} line {number} is not a servelab run record",
                        "the experiment directory is damaged; open the result by id instead",
                    ) from None
        return results


def resolve_result(ref: str, root: Path) -> ResultStore:
    """RESULT as users type it: an id in ``root``'s database, or an experiment directory."""
    if ref.isdigit():
        return ResultStore.from_database(Database(root / DB_FILE), int(ref))
    path = Path(ref)
    if path.is_dir():
        return ResultStore.open(path)
    raise ServelabError(
        f"no result {ref!r}: not an id in {root / DB_FILE} nor a directory",
        "pass an id from `servelab results list` or a results directory",
    )
