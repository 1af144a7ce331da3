"""The shapes of experiment dictionaries and files, below the experiment that is built
from them (``config.experiment``: ``build_experiment``, ``read_experiment_file``): merging
overrides, grids, dotted keys, how loads are sliced and the slices chosen by default,
pydantic's errors as one line. Checking an experiment against the plug-ins it names is the
floor above: servelab.prepare.building."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from servelab.config.load import LoadSpec, Workload
from servelab.errors import SpecError

# The drivers' names, and what each declares it can do (read through the registry):
# whether an experiment is measured in slices unless it says.
from servelab.registry import DEFAULT_DRIVER, DRIVER_NAMES, capabilities

# A slice shorter than this would be mostly the driver's connection set-up.
MIN_SLICE_S = 1.0


def slicing_problem(load: LoadSpec, slices: int) -> str | None:
    """Why ``load`` cannot be cut into ``slices`` (None when it can)."""
    if slices == 1:
        return None
    if load.model != "closed":
        return f"a {load.model}-model load keeps its own schedule; slices cut it"
    if load.duration_s is not None and load.duration_s / slices < MIN_SLICE_S:
        return (
            f"{load.duration_s:g} s in {slices} slices is under {MIN_SLICE_S:g} s each "
            "(mostly the driver's connection set-up)"
        )
    if load.requests is not None and load.requests < slices * load.concurrency:
        return f"{load.requests} requests in {slices} slices leave under one per connection"
    return None


# Slice length servelab aims for when it chooses the slices itself (see the README's
# "Measuring in slices"): long enough that the driver's connection set-up is a small
# part of it, short enough that several passes fit in a quick study.
SLICE_TARGET_S = 1.0
# Side by side, longer slices: the stacks see the same moments of the machine whatever
# the length, and a longer slice averages the stacks' own fast noise.
SIDE_BY_SIDE_SLICE_S = 3.0
MAX_AUTO_SLICES = 10


def auto_slices(load: LoadSpec, target_s: float = SLICE_TARGET_S) -> int:
    """The slices a load is cut into by default: about ``target_s`` each (or at least 20
    requests per connection for a request count), 1 where slicing does not apply."""
    if load.model != "closed":
        return 1
    if load.duration_s is not None:
        wanted = int(load.duration_s // target_s)
    else:
        assert load.requests is not None
        wanted = load.requests // (20 * load.concurrency)
    return max(1, min(MAX_AUTO_SLICES, wanted))



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


def default_slices(data: dict[str, Any]) -> int:
    """Interleaved slices wherever they apply (oha, closed loads, no ramp); else 1."""
    driver = data.get("driver", DEFAULT_DRIVER)
    if not isinstance(driver, str) or driver not in DRIVER_NAMES:
        return 1  # the experiment's own validation says what is wrong
    if "latencies" not in capabilities(driver) or data.get("slo") is not None:
        return 1
    workloads = data.get("workloads") or ()
    try:
        loads = [Workload.model_validate(w).load for w in workloads]
    except (ValidationError, TypeError):
        return 1  # the workloads' own validation says what is wrong
    if not loads:
        return 1
    if data.get("side_by_side"):  # at least two slices of a second, about 3 s each
        return min(
            max(
                2 if (load.duration_s or 0) >= 2 * MIN_SLICE_S else 1,
                auto_slices(load, SIDE_BY_SIDE_SLICE_S),
            )
            for load in loads
        )
    return min(auto_slices(load) for load in loads)
