"""The Django reference app's database and a slowed link to it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from servelab.config.base import (
    Model,
)

# The databases the Django reference app runs on (--database).
Database = Literal["sqlite", "postgresql"]
MAX_DB_DELAY_MS = 10_000.0
DbDelay = Annotated[float, Field(ge=0, le=MAX_DB_DELAY_MS)]


class DatabaseSpec(Model):
    """The Django reference app's database and, for PostgreSQL, a slowed link to it.

    ``latency_ms`` is added to every round trip between the app and PostgreSQL
    (half on the way there, half on the way back, as on a real network), each
    delay drawn from latency ± ``jitter_ms``. ``link`` chooses how: ``netem``
    (a kernel qdisc on a veth pair to a namespace holding PostgreSQL), or
    ``toxiproxy`` (a TCP proxy); ``auto`` takes netem where the kernel has it.
    """

    kind: Database
    latency_ms: DbDelay = 0.0
    jitter_ms: DbDelay = 0.0
    link: Literal["auto", "netem", "toxiproxy"] = "auto"

    @model_validator(mode="after")
    def _check(self) -> DatabaseSpec:
        if (self.latency_ms or self.jitter_ms) and self.kind != "postgresql":
            raise ValueError(
                "latency_ms and jitter_ms need kind = 'postgresql' (SQLite is a file the app "
                "opens itself: there is no link to slow down)"
            )
        if self.jitter_ms > self.latency_ms:
            raise ValueError(
                f"jitter_ms {self.jitter_ms:g} exceeds latency_ms {self.latency_ms:g}; each "
                "delay is latency ± jitter and cannot go below 0, so keep jitter <= latency"
            )
        return self

    @property
    def slowed(self) -> bool:
        return self.latency_ms > 0

