"""A run's options applied to its experiment: the driver's options, the order, slices and
side by side, the stopping rule. Each step checks the shapes it changes; the plug-ins are
asked once, of the result (``checks.checked_stages``), each problem told as the step that
brought it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servelab.config.building import default_slices
from servelab.config.experiment import Experiment, StoppingSpec, validated
from servelab.config.run import RunOptions
from servelab.errors import SpecError
from servelab.plugins.driver import driver_class
from servelab.prepare.checks import DEFAULT_FIX, Stage, blame_earlier, checked_stages
from servelab.registry import DRIVER_NAMES, FRONTS

ACCESS_LOG = "access_log"  # the ProxySpec knob --access-log turns on


Step = Callable[[Experiment], Experiment]
ORDER_SOURCE = "--slices/--side-by-side"
ORDER_FIX = "give fewer slices, a longer duration (oha, closed loads), or leave them out"


def apply_run_options(experiment: Experiment, options: RunOptions) -> Experiment:
    """``experiment`` with ``options``' order, slicing, stopping and driver options,
    checked against its plug-ins once."""
    return checked_stages(run_option_stages(experiment, options))


def run_option_stages(experiment: Experiment, options: RunOptions) -> list[Stage]:
    """``experiment`` (first) and each change ``options`` make to it, in turn, with who
    is blamed for a problem it brings; none checked against the plug-ins yet (a step
    that fails blames an earlier stage's problem first, as checking each would)."""
    stages = [Stage(experiment, experiment.source)]
    switching = switching_with(options)
    steps: tuple[tuple[Step, str, Callable[[Experiment], str]], ...] = (
        (lambda e: with_driver_options(e, options.driver_options), "driver options",
         lambda e: f"see --help for the {e.driver} options"),
        (lambda e: with_access_log(e, options.access_log), "--access-log",
         lambda e: _access_log_fix()),
        (lambda e: with_order(
            e, options.order, options.order_seed, options.slices, options.side_by_side,
            switching,
        ), ORDER_SOURCE, lambda e: ORDER_FIX),
        (lambda e: with_stopping(
            e, options.precision_pct, options.budget_s, options.min_effect_pct
        ), f"experiment {experiment.name}", lambda e: DEFAULT_FIX),
    )
    for step, source, fix in steps:
        before = stages[-1].experiment
        try:
            changed = step(before)
        except SpecError:
            blame_earlier(stages)
            raise
        if changed is not before:
            stages.append(Stage(changed, source, fix(before)))
    return stages


def _access_log_fix() -> str:
    logging = FRONTS.where(lambda front: ACCESS_LOG in front.own_knobs)
    return f"leave out --access-log, or measure a stack with proxy kind {logging[0]!r}"


def with_access_log(experiment: Experiment, access_log: bool) -> Experiment:
    """The experiment with the front's access log on in every stack whose front has one
    (``--access-log``: nginx); a one-line error when none has. Not yet asked of the
    plug-ins (``apply_run_options``)."""
    if not access_log:
        return experiment
    logging = FRONTS.where(lambda front: ACCESS_LOG in front.own_knobs)
    data = experiment.model_dump()
    stacks = [s for s in (data["baseline"], *data["variants"]) if s["proxy"]["kind"] in logging]
    fix = _access_log_fix()
    if not stacks:
        raise SpecError(
            f"--access-log is {' and '.join(logging)}'s: no variant of this experiment has "
            "it in front",
            fix,
        )
    for stack in stacks:
        stack["proxy"][ACCESS_LOG] = True
    return Experiment.model_validate(data)


def with_driver_options(experiment: Experiment, options: dict[str, Any]) -> Experiment:
    """The experiment with the driver options given on the command line added (their
    shapes are the driver's: ``apply_run_options`` asks it)."""
    if not options:
        return experiment
    if driver_class(experiment.driver).options_model is None:
        takers = [n for n in DRIVER_NAMES if driver_class(n).options_model is not None]
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in options)
        raise SpecError(
            f"load driver {experiment.driver} takes no options of its own ({flags})",
            f"pass --driver {' or '.join(takers)} (or set driver in the experiment file)",
        )
    merged = {**experiment.driver_options, **options}
    fix = f"see --help for the {experiment.driver} options"
    return validated({**experiment.model_dump(), "driver_options": merged}, "driver options", fix)


def switching_with(options: RunOptions) -> bool | None:
    """The switching the options ask for (None: the experiment's own): --switch or
    --no-switch; with --profile none (py-spy samples a window of its own after each
    measured slice, which switched passes do not have), and --switch with --profile is
    bad input."""
    if options.profile and options.switching:
        raise SpecError(
            "--switch and --profile cannot go together: py-spy samples a window of its own "
            "after each measured slice, and switched passes have none",
            "leave out --switch (passes with --profile start a driver anew per slice)",
        )
    return False if options.profile else options.switching


def with_order(
    experiment: Experiment,
    order: str | None,
    order_seed: int | None,
    slices: int | None = None,
    side_by_side: bool | None = None,
    switching: bool | None = None,
) -> Experiment:
    """The experiment with the run-order options given (shapes checked; the driver is
    asked by ``apply_run_options``)."""
    update: dict[str, object] = {}
    if switching is not None and switching != experiment.switching:
        update["switching"] = switching
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
    return validated({**experiment.model_dump(), **update}, ORDER_SOURCE, ORDER_FIX)


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
