"""The base of every spec model: frozen, unknown keys are errors, and shared bounds.

Models are frozen pydantic models with ``extra="forbid"`` so that a typo in a
TOML file ("wokers = 2") is an error that names the key, not a silent default.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
# One open-model run may not plan more requests than this (rate x duration),
# and no run may be given more than an hour.
MAX_REQUESTS_PER_RUN = 10_000_000
MAX_RUN_S = 3600.0


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

