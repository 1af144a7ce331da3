"""An experiment: a baseline, its variants and workloads, slicing and stopping."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from servelab.config.base import (
    Model,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
)
from servelab.config.building import (
    deep_merge,
    default_slices,
    describe_validation_error,
    expand_grid,
    slicing_problem,
)
from servelab.config.database import DatabaseSpec
from servelab.config.load import SloSpec, WarmupSpec, Workload
from servelab.config.stack import (
    StackSpec,
)
from servelab.config.thresholds import COUNTED, parse_threshold

# The driver's names only; what it can do is asked in servelab.prepare.checks.
from servelab.errors import SpecError
from servelab.registry import DEFAULT_DRIVER, DRIVER_NAMES

# The registry's names as a Literal for pydantic; mypy sees str (as config.stack's kinds).
if TYPE_CHECKING:
    DriverName = str
else:
    DriverName = Literal[DRIVER_NAMES]

class StoppingSpec(Model):
    """Measure until every comparison is clear, or the budget is spent (sliced runs only).

    A comparison is clear when its 95 % interval is at most ``precision_pct`` wide on
    either side, or lies entirely beyond ±``min_effect_pct``. While one is not, servelab
    adds rounds of fresh starts of every variant (and more passes per start when the
    slices, not the starts, are the noisier part), as long as the next round fits in
    ``budget_s`` of measuring time, up to ``max_repetitions`` starts per variant.
    """

    precision_pct: PositiveFloat = 5.0
    budget_s: PositiveFloat = 180.0
    min_effect_pct: NonNegativeFloat = 0.0
    max_repetitions: PositiveInt = 30
    # Regression thresholds (``servelab check``: "rps < -5%"): set, a comparison is clear
    # once each threshold is decided, crossed or held (servelab.analysis.thresholds).
    thresholds: tuple[str, ...] = ()

    @field_validator("thresholds")
    @classmethod
    def _parse_thresholds(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        parsed = [parse_threshold(text) for text in value]
        for threshold in parsed:
            if threshold.metric in COUNTED:
                raise ValueError(
                    f"threshold {threshold.text!r}: {threshold.metric} is counted with no "
                    "load, by servelab check and bisect only; use rps_per_cpu here"
                )
        return tuple(threshold.text for threshold in parsed)


class Experiment(Model):
    name: str
    baseline: StackSpec
    variants: tuple[StackSpec, ...] = ()
    workloads: tuple[Workload, ...]
    repetitions: PositiveInt = 3
    warmup: WarmupSpec = Field(default_factory=WarmupSpec)
    driver: DriverName = DEFAULT_DRIVER
    # The driver's own settings (e.g. a locustfile), checked by its ``options_model``.
    driver_options: dict[str, Any] = Field(default_factory=dict)
    order: Literal["interleaved", "random"] = "interleaved"
    order_seed: int = 0  # the random order's seed (``order = "random"``)
    # Set for ramps: each launch measures its workloads in order (rising rates) and
    # stops at the first one that breaks this SLO.
    slo: SloSpec | None = None
    # The Django reference app's database (set by --database / --db-latency or [database]).
    database: DatabaseSpec | None = None
    # Each run measured in this many slices interleaved with every other run's, all the
    # runs' stacks alive at once (servelab.measuring.slices); 1: each run in one piece, in turn.
    # Experiments built from a file or a study choose it from their loads (about 1 s a
    # slice) wherever slicing applies: see ``default_slices``. Stored ones keep theirs
    # (records from before slices existed were measured in one piece).
    slices: PositiveInt = 1
    # Set: keep measuring until every comparison is clear or the budget is spent.
    stopping: StoppingSpec | None = None
    # Slices of one round's stacks measured at the same time, each by its own driver,
    # the stacks sharing the stack CPUs (duet benchmarking): the machine's moments then
    # fall on every variant alike. Figures are each stack's share; ratios compare.
    side_by_side: bool = False
    # In turns, each workload's passes driven by a load driver per stack kept running and
    # switched between the stacks every 0.5 s (servelab.measuring.switching) where the
    # stacks drain a stopped driver's requests fast enough; else started anew per slice.
    # New experiments switch unless told not to (``build_experiment``); stored ones keep
    # theirs (records from before switching existed were measured with a driver anew).
    switching: bool = False
    # The file it was read from (``from_toml``): what a problem found in it later, by
    # servelab.prepare, is told under. Not a field: neither stored nor hashed.
    _read_from: str | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self) -> Experiment:
        if not self.workloads:
            raise ValueError("an experiment needs at least one workload")
        if self.slices > 1:
            self._check_slices()
        names = [s.name for s in self.stacks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"variant names must be unique; repeated: {', '.join(dupes)}")
        wl = [w.name for w in self.workloads]
        if len(set(wl)) != len(wl):
            raise ValueError("workload names must be unique")
        return self

    def _check_slices(self) -> None:
        """The loads' side; whether the driver can slice, servelab.prepare.checks asks."""
        if self.slo is not None:
            raise ValueError("a ramp cannot be sliced: it measures rising rates in order")
        for workload in self.workloads:
            problem = slicing_problem(workload.load, self.slices)
            if problem:
                raise ValueError(f"workload {workload.name!r} cannot be sliced: {problem}")

    @classmethod
    def from_toml(cls, path: str | Path) -> Experiment:
        """The experiment file at ``path``, its shapes checked: what the model can check
        on its own (the file read as UTF-8 TOML, variants merged onto the baseline, the
        grid expanded, the slices chosen, every value's type and range, names known to
        the registries, unique names); SpecError naming the problem and the fix.

        What the plug-ins say of its values (a knob a server does not have, a protocol
        no front speaks, whether the driver can slice, its options) is checked above, by
        servelab.prepare: ``servelab.load_experiment(path)`` checks both at load, and
        ``servelab.run``/``measure`` check whatever they are given once, before anything
        starts, with the same one line."""
        experiment = read_experiment_file(Path(path))
        experiment._read_from = str(Path(path))
        return experiment

    def told_as(self, path: str | None) -> Experiment:
        """This experiment, its problems told under ``path`` (the file it came from)."""
        copy = self.model_copy()
        copy._read_from = path
        return copy

    @property
    def directory(self) -> Path:
        """Where the paths it names are relative to: its file's directory, else the
        current one."""
        return Path(self._read_from).parent if self._read_from else Path()

    @property
    def source(self) -> str:
        """What a problem with this experiment is told under: the file it was read from,
        else its name."""
        return self._read_from or f"experiment {self.name}"

    def with_stacks(self, stacks: Sequence[StackSpec]) -> Experiment:
        """This experiment with ``stacks`` (baseline first), unvalidated like model_copy."""
        return self.model_copy(update={"baseline": stacks[0], "variants": tuple(stacks[1:])})

    @property
    def stacks(self) -> tuple[StackSpec, ...]:
        """Baseline first, then the variants."""
        return (self.baseline, *self.variants)


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
