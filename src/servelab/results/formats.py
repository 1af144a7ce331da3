"""Numbered formats of the records the results store keeps: experiment specs and runs.

Every spec and run record servelab stores carries its format number (``FORMAT_KEY``).
Reading one, ``RecordFormat.current`` brings it up to the current format through the
upgrades, one format at a time, so that the models and all code reading them see
only the current shape; a record from a newer servelab is refused with a message
that says so, not with a validation error.

Format 1 is the first numbered one, and the shape of every record written before
formats were numbered: each field added over time came with a default that means
what older records meant (a run's ``slices = 1``: measured in one piece), so an older
record that leaves it out reads as it always did, and exports still show only what
was stored. Such an addition needs no new format. A change a default cannot express
(a field renamed, moved or meaning something else) does: append the upgrade from the
last format to the kind's ``upgrades``, which makes its format one more.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servelab.config.experiment import Experiment
from servelab.errors import ServelabError
from servelab.results.records import RunRecord

FORMAT_KEY = "record_format"

Record = dict[str, Any]
Upgrade = Callable[[Record], Record]


@dataclass(frozen=True)
class RecordFormat:
    """The formats of one kind of stored record: ``upgrades[n - 1]`` takes a record of
    format n to format n + 1."""

    kind: str  # names the record in messages
    upgrades: tuple[Upgrade, ...] = ()

    @property
    def number(self) -> int:
        """The format this servelab writes."""
        return len(self.upgrades) + 1

    def stamped(self, record: Record) -> Record:
        return {FORMAT_KEY: self.number, **record}

    def current(self, stored: Any) -> Record:
        """A stored record in the current format, without its number (ValueError when
        it is not a record at all)."""
        if not isinstance(stored, dict):
            raise ValueError(f"a {self.kind} record is a JSON object, not {type(stored).__name__}")
        record = dict(stored)
        found = record.pop(FORMAT_KEY, 1)
        if not isinstance(found, int) or not 1 <= found <= self.number:
            raise ServelabError(
                f"a stored {self.kind} record has format {found!r}; this servelab reads "
                f"formats 1 to {self.number}",
                "open it with the (newer) servelab that wrote it",
            )
        for upgrade in self.upgrades[found - 1 :]:
            record = upgrade(record)
        return record


def _order_seed(record: Record) -> Record:
    """Format 1 -> 2: the random order's ``seed`` is ``order_seed`` ("seed" means the
    source articles)."""
    record = dict(record)
    if "seed" in record:
        record["order_seed"] = record.pop("seed")
    return record


SPEC = RecordFormat("experiment", upgrades=(_order_seed,))
RUN = RecordFormat("run")


def spec_record(experiment: Experiment) -> Record:
    return SPEC.stamped(experiment.model_dump(mode="json"))


def experiment_from(stored: Any) -> Experiment:
    return Experiment.model_validate(SPEC.current(stored))


def run_json(run: RunRecord) -> str:
    """One run as stored: a line of JSON."""
    record = RUN.stamped(run.model_dump(mode="json"))
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def run_from(text: str) -> RunRecord:
    """A stored run (ValueError for text that is not one)."""
    return RunRecord.model_validate(RUN.current(json.loads(text)))
