"""How to run an experiment: ``RunOptions``, built once (by the command line or a Python
caller) and handed to ``servelab.api.run``; and applying them to an experiment."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from servelab.config.building import default_slices, describe_validation_error
from servelab.config.experiment import Experiment, StoppingSpec
from servelab.config.stack import AppSpec
from servelab.errors import SpecError
from servelab.fronts.registry import FRONTS
from servelab.load.registry import DRIVER_NAMES, DRIVERS

if TYPE_CHECKING:
    from servelab.apps.user import Database, UserRequest

DEFAULT_RESULTS_DIR = Path("servelab-results")
LOOPBACK = "127.0.0.1"
ACCESS_LOG = "access_log"  # the ProxySpec knob --access-log turns on


@dataclass(frozen=True)
class RunOptions:
    """Everything about a run that is not the experiment itself (cf. uvicorn's Config)."""

    results_dir: Path = DEFAULT_RESULTS_DIR  # servelab.db and one directory per experiment
    # CPUs: taskset lists for the stack and the driver, pinning, a quota, cgroup priority.
    stack_cpus: str | None = None
    driver_cpus: str | None = None
    pin: bool = True
    stack_cpu_quota: float | None = None
    cpu_priority: bool = True
    # Continue the unfinished experiment of the same name; allow_other_machine: even when
    # it was begun on another machine.
    resume: bool = False
    allow_other_machine: bool = False
    # Run even what this machine cannot hold (servelab.host.limits: memory, open files,
    # threads, workers per CPU).
    allow_beyond_machine: bool = False
    # Overrides of the experiment's own order, slicing and stopping (None: keep its own).
    order: str | None = None
    order_seed: int | None = None
    slices: int | None = None
    side_by_side: bool | None = None
    precision_pct: float | None = None
    budget_s: float | None = None
    min_effect_pct: float | None = None
    # The user's app and request (None: the experiment's own), and the Django database.
    app: AppSpec | None = None
    request: UserRequest | None = None
    replace_workloads: bool = False  # a study: the user's request replaces its workloads
    database: Database | None = None
    db_latency_ms: float | None = None
    db_jitter_ms: float | None = None
    startup_timeout_s: float = 30.0
    # Result files rewritten after every run: format ("json", "markdown", "csv") -> path
    # (servelab.results.writers; --export-json ...).
    result_files: tuple[tuple[str, Path], ...] = ()
    # The load driver's own options (--locustfile...), merged into the experiment's.
    driver_options: dict[str, Any] = field(default_factory=dict)
    # The address the stacks' fronts listen on (remote load workers must reach it).
    listen: str = LOOPBACK
    # The terminal: every run's line and the whole report (-v), or a progress bar, then
    # the compact summary and the answer (report.terminal).
    detail: bool = False
    # Said on the console before measuring (how a study was fitted to this machine).
    notes: tuple[str, ...] = ()
    # Sample the stacks' Python processes with py-spy in every measured window: where the
    # CPU went, per variant (servelab.observe.profile, servelab.analysis.profile).
    profile: bool = False
    # nginx logs every request's client address; each run counts them (--access-log).
    access_log: bool = False

    def apply(self, experiment: Experiment) -> Experiment:
        """``experiment`` with this run's order, slicing, stopping, driver options and
        access log (checked)."""
        return with_stopping(
            with_order(
                with_access_log(
                    with_driver_options(experiment, self.driver_options), self.access_log
                ),
                self.order, self.order_seed, self.slices, self.side_by_side,
            ),
            self.precision_pct, self.budget_s, self.min_effect_pct,
        )


def with_access_log(experiment: Experiment, access_log: bool) -> Experiment:
    """The experiment with the front's access log on in every stack whose front has one
    (``--access-log``: nginx); a one-line error when none has."""
    if not access_log:
        return experiment
    logging = FRONTS.where(lambda front: ACCESS_LOG in front.own_knobs)
    data = experiment.model_dump()
    stacks = [s for s in (data["baseline"], *data["variants"]) if s["proxy"]["kind"] in logging]
    if not stacks:
        raise SpecError(
            f"--access-log is {' and '.join(logging)}'s: no variant of this experiment has "
            "it in front",
            f"leave out --access-log, or measure a stack with proxy kind {logging[0]!r}",
        )
    for stack in stacks:
        stack["proxy"][ACCESS_LOG] = True
    return Experiment.model_validate(data)


def with_driver_options(experiment: Experiment, options: dict[str, Any]) -> Experiment:
    """The experiment with the driver options given on the command line added."""
    if not options:
        return experiment
    if DRIVERS.cls(experiment.driver).options_model is None:
        takers = [n for n in DRIVER_NAMES if DRIVERS.cls(n).options_model is not None]
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in options)
        raise SpecError(
            f"load driver {experiment.driver} takes no options of its own ({flags})",
            f"pass --driver {' or '.join(takers)} (or set driver in the experiment file)",
        )
    merged = {**experiment.driver_options, **options}
    try:
        return Experiment.model_validate({**experiment.model_dump(), "driver_options": merged})
    except ValidationError as exc:
        raise SpecError(
            f"driver options: {describe_validation_error(exc)}",
            f"see --help for the {experiment.driver} options",
        ) from None


def with_order(
    experiment: Experiment,
    order: str | None,
    order_seed: int | None,
    slices: int | None = None,
    side_by_side: bool | None = None,
) -> Experiment:
    """The experiment with the run-order options given (checked again)."""
    update: dict[str, object] = {}
    if side_by_side is not None and side_by_side != experiment.side_by_side:
        update["side_by_side"] = side_by_side
        if slices is None:  # slices of the other length
            data = {**experiment.model_dump(), "side_by_side": side_by_side}
            update["slices"] = default_slices(data)
    if order is not None:
        update["order"] = order
    if order_seed is not None:
        update["order_seed"] = order_seed
    if slices is not None:
        update["slices"] = slices
        if slices == 1:  # runs in one piece, in turn: nothing side by side, no extra rounds
            update["side_by_side"] = False
            update["stopping"] = None
    if not update:
        return experiment
    try:
        return Experiment.model_validate({**experiment.model_dump(), **update})
    except ValidationError as exc:
        raise SpecError(
            f"--slices/--side-by-side: {describe_validation_error(exc)}",
            "give fewer slices, a longer duration (oha, closed loads), or leave them out",
        ) from None


def with_stopping(
    experiment: Experiment,
    precision_pct: float | None,
    budget_s: float | None,
    min_effect_pct: float | None,
) -> Experiment:
    """The experiment with the stopping options given."""
    update: dict[str, float] = {}
    for label, value in (("--precision", precision_pct), ("--min-effect", min_effect_pct)):
        if value is not None and (value < 0 or (label == "--precision" and value == 0)):
            raise SpecError(f"{label} must be positive, got {value:g}", f"pass {label} > 0")
    if budget_s is not None and budget_s <= 0:
        raise SpecError(f"--budget must be positive, got {budget_s:g} s", "e.g. '3m'")
    if precision_pct is not None:
        update["precision_pct"] = precision_pct
    if budget_s is not None:
        update["budget_s"] = budget_s
    if min_effect_pct is not None:
        update["min_effect_pct"] = min_effect_pct
    if not update:
        return experiment
    if experiment.slices == 1:
        raise SpecError(
            "--precision, --budget and --min-effect keep adding interleaved rounds, and this "
            "experiment is measured in one piece per run (--slices 1, a driver that keeps no "
            "per-request latencies, or an open-model load)",
            "leave out --slices 1 and use the default driver with closed loads",
        )
    stopping = (experiment.stopping or StoppingSpec()).model_copy(update=update)
    return experiment.model_copy(update={"stopping": stopping})


def parse_duration(text: str) -> float:
    """'3m' -> 180.0; '90s', '1h', '1m30s' and plain seconds ('200') too."""
    cleaned = text.strip().lower()
    number = r"(\d+(?:\.\d+)?)"
    parts = re.fullmatch(rf"(?:{number}h)?(?:{number}m)?(?:{number}s?)?", cleaned, re.ASCII)
    if not cleaned or parts is None or not any(parts.groups()):
        raise SpecError(
            f"invalid duration {text!r}", "write e.g. '3m', '90s', '1h' or '1m30s'"
        )
    hours, minutes, seconds = (float(x) if x else 0.0 for x in parts.groups())
    total = 3600 * hours + 60 * minutes + seconds
    if total <= 0:
        raise SpecError(f"the duration {text!r} is zero", "give a positive time, e.g. '3m'")
    return total
