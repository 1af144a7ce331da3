"""The results directory: the experiment as run, then one line per finished run.

Layout: ``<root>/<timestamp>-<name>/experiment.json`` (spec + environment),
``runs.jsonl`` (appended and fsync'ed after every run, so a crash or Ctrl-C
loses at most the run in progress), and the reports written from them.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from servelab.errors import ServelabError
from servelab.results import RunResult
from servelab.spec import Experiment

EXPERIMENT_FILE = "experiment.json"
RUNS_FILE = "runs.jsonl"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "experiment"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class ResultStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, root: Path, experiment: Experiment, environment: dict[str, Any]) -> ResultStore:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = root / f"{stamp}-{_slug(experiment.name)}"
        suffix = 1
        while path.exists():
            suffix += 1
            path = root / f"{stamp}-{_slug(experiment.name)}-{suffix}"
        path.mkdir(parents=True)
        document = {"experiment": experiment.model_dump(mode="json"), "environment": environment}
        _write_atomic(path / EXPERIMENT_FILE, json.dumps(document, indent=2))
        (path / RUNS_FILE).touch()
        return cls(path)

    @classmethod
    def open(cls, path: Path) -> ResultStore:
        if not (path / EXPERIMENT_FILE).is_file():
            raise ServelabError(
                f"{path} is not a servelab results directory (no {EXPERIMENT_FILE})",
                "pass a directory that `servelab study` or `servelab run` wrote",
            )
        return cls(path)

    def _document(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / EXPERIMENT_FILE).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ServelabError(
                f"{self.path / EXPERIMENT_FILE} is unreadable ({exc})",
                "the results directory is damaged; rerun the experiment",
            ) from None

    @property
    def experiment(self) -> Experiment:
        return Experiment.model_validate(self._document()["experiment"])

    @property
    def environment(self) -> dict[str, Any]:
        return self._document().get("environment", {})

    def add(self, run: RunResult) -> None:
        line = run.model_dump_json() + "\n"
        with open(self.path / RUNS_FILE, "a") as runs:
            runs.write(line)
            runs.flush()
            os.fsync(runs.fileno())

    def runs(self) -> list[RunResult]:
        results = []
        with open(self.path / RUNS_FILE) as runs:
            for number, line in enumerate(runs, 1):
                if not line.strip():
                    continue
                try:
                    results.append(RunResult.model_validate_json(line))
                except ValidationError:
                    if not line.endswith("\n"):
                        break  # a run cut off mid-write by a crash: not a finished run
                    raise ServelabError(
                        f"{self.path / RUNS_FILE} line {number} is not a servelab run record",
                        "the results file is damaged; remove that line or rerun",
                    ) from None
        return results
