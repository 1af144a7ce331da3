"""Experiments built from user input (TOML files, studies, grids, tune spaces): the
model's shapes checked, slices chosen from what the driver can do, then the plug-ins'
own rules (``servelab.prepare.checks``)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from servelab.config.building import deep_merge, describe_validation_error, expand_grid
from servelab.config.experiment import (
    MIN_SLICE_S,
    SIDE_BY_SIDE_SLICE_S,
    Experiment,
    auto_slices,
)
from servelab.config.load import Workload
from servelab.errors import SpecError
from servelab.load.registry import DEFAULT_DRIVER, DRIVER_NAMES, capabilities
from servelab.prepare.checks import checked


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


def experiment_from_dict(
    data: dict[str, Any], *, source: str = "experiment", whole_variants: bool = False
) -> Experiment:
    """Validate a raw experiment dict (as read from TOML) into an Experiment, checked
    against the plug-ins it names.

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
    return checked(validated(data, source, "correct that value"), source)


def validated(data: dict[str, Any], source: str, fix: str) -> Experiment:
    """The experiment ``data`` describes, its shapes checked; a bad value is one line
    naming ``source`` (where the value came from) and ``fix``."""
    try:
        return Experiment.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{source}: {describe_validation_error(exc)}", fix) from None


def load_experiment_file(path: Path) -> Experiment:
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
    return experiment_from_dict(raw, source=str(path))
