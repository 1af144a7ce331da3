"""The shapes of experiment dictionaries and files: merging overrides, grids, dotted keys,
the slices chosen by default, pydantic's errors as one line, and an experiment built from
them with its shapes checked (``build_experiment``, ``read_experiment_file``: what
``Experiment.from_toml`` does). Checking it against the plug-ins it names is the floor
above: servelab.prepare.building."""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from servelab.config.experiment import (
    MIN_SLICE_S,
    SIDE_BY_SIDE_SLICE_S,
    Experiment,
    auto_slices,
)
from servelab.config.load import Workload
from servelab.errors import SpecError

# The drivers' names, and what each declares it can do (read through the registry):
# whether an experiment is measured in slices unless it says.
from servelab.registry import DEFAULT_DRIVER, DRIVER_NAMES, capabilities


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


def build_experiment(
    data: dict[str, Any], *, source: str = "experiment", whole_variants: bool = False
) -> Experiment:
    """A raw experiment dict (as read from TOML) as an Experiment, its shapes checked
    (SpecError naming ``source`` and the value); what the plug-ins say of it is asked
    above, by servelab.prepare.building.experiment_from_dict.

    ``variants`` entries are overrides merged onto the baseline (with
    ``whole_variants``, whole stacks taken as they are: a knob of the baseline's server
    must not leak into a variant with another server); ``grid`` maps dotted knob names
    to lists of values and adds one variant per combination.
    """
    data = dict(data)
    baseline = data.get("baseline", {})
    if not isinstance(baseline, dict):
        raise SpecError(f"{source}: 'baseline' must be a table", "write [baseline] with its knobs")
    baseline = {"name": "baseline", **baseline}
    variants = []
    overrides = data.pop("variants", []) or []
    if not isinstance(overrides, list):
        raise SpecError(
            f"{source}: 'variants' must be an array of tables", "write each as [[variants]]"
        )
    for index, override in enumerate(overrides):
        if not isinstance(override, dict):
            raise SpecError(f"{source}: variant {index + 1} must be a table", "use [[variants]]")
        if "name" not in override:
            raise SpecError(f"{source}: variant {index + 1} has no name", "add name = '...'")
        variants.append(dict(override) if whole_variants else deep_merge(baseline, override))
    grid = data.pop("grid", None) or {}
    if not isinstance(grid, dict):
        raise SpecError(
            f"{source}: 'grid' must be a table", "e.g. [grid] 'server.workers' = [1, 2]"
        )
    variants.extend(expand_grid(baseline, grid))
    data["baseline"] = baseline
    data["variants"] = variants
    if data.get("slices") is None:
        data["slices"] = default_slices(data)
    if data.get("switching") is None:
        # Switched passes by default wherever passes are: about two times narrower
        # intervals on the cheap endpoints in quick, as right (docs/validation/spread.md,
        # "Switched passes, built"); where they do not apply (side by side, a driver that cannot,
        # a slow stack) nothing changes. Runs in one piece have none (and keep the hash
        # they had before switching existed).
        slices = data["slices"]  # a wrong type is the model's to refuse
        data["switching"] = isinstance(slices, int) and slices > 1
    return validated(data, source, "correct that value")


def validated(data: dict[str, Any], source: str, fix: str) -> Experiment:
    """The experiment ``data`` describes, its shapes checked; a bad value is one line
    naming ``source`` (where the value came from) and ``fix``."""
    try:
        return Experiment.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{source}: {describe_validation_error(exc)}", fix) from None


def read_experiment_file(path: Path) -> Experiment:
    """The experiment file at ``path`` (its name, unless it gives one, the file's stem),
    its shapes checked: SpecError for a file that cannot be read or a bad value."""
    try:
        raw = tomllib.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise SpecError(f"experiment file {path} does not exist", "check the path") from None
    except IsADirectoryError:
        raise SpecError(f"{path} is a directory", "give the experiment's TOML file") from None
    except OSError as exc:
        raise SpecError(
            f"cannot read {path}: {exc.strerror}", "check the file's permissions"
        ) from None
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"{path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start})",
            "save the file as UTF-8 (TOML files are UTF-8)",
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path} is not valid TOML: {exc}", "fix the TOML syntax") from None
    raw.setdefault("name", path.stem)
    return build_experiment(raw, source=str(path))
