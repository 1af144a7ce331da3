"""The shapes of experiment dictionaries: merging overrides, grids, dotted keys, and
pydantic's errors as one line. Building a checked experiment from them asks the plug-ins
too: servelab.prepare.building."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from servelab.errors import SpecError


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``override`` merged in, recursively for tables."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """A copy of ``data`` with ``server.workers``-style key set to ``value``."""
    head, _, rest = dotted.partition(".")
    if not rest:
        return {**data, head: value}
    inner = data.get(head, {})
    if not isinstance(inner, dict):
        raise SpecError(f"cannot set {dotted!r}: {head!r} is not a table", "check the grid keys")
    return {**data, head: set_dotted(inner, rest, value)}


def format_value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def expand_grid(base: dict[str, Any], grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """One stack dict per combination of the grid's values, named after its values."""
    if not grid:
        return []
    keys = list(grid)
    for key in keys:
        if not isinstance(grid[key], list) or not grid[key]:
            raise SpecError(f"grid key {key!r} needs a non-empty list of values", "e.g. [1, 2, 3]")
    stacks = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        stack = dict(base)
        for key, value in zip(keys, combo, strict=True):
            stack = set_dotted(stack, key, value)
        label = ",".join(
            f"{k.rsplit('.', 1)[-1]}={format_value(v)}" for k, v in zip(keys, combo, strict=True)
        )
        stack["name"] = label
        stacks.append(stack)
    return stacks


def describe_validation_error(exc: ValidationError) -> str:
    """The first problem of a pydantic error, as 'where: what' on one line."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "value"
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    return first_of([f"{where}: {message}", *exc.errors()[1:]])


def first_of(problems: Sequence[object]) -> str:
    """The first problem, and how many more there are: 'x (and 2 more problems)'."""
    extra = len(problems) - 1
    more = f" (and {extra} more problem{'s' if extra > 1 else ''})" if extra else ""
    return f"{problems[0]}{more}"
