"""The plug-ins' own rules for an experiment: knobs a server or front cannot honour,
protocols nobody speaks, what a load driver can do. The model checks shapes only; every
path that builds an experiment from user input ends here (``checked``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import ValidationError

from servelab.config.building import describe_validation_error, first_of
from servelab.config.experiment import Experiment
from servelab.config.stack import ProxySpec, ServerSpec, StackSpec
from servelab.errors import SpecError
from servelab.plugins.driver import driver_class
from servelab.plugins.front import get_front
from servelab.plugins.server import get_server
from servelab.registry import (
    DRIVER_NAMES,
    FRONTS,
    SERVERS,
    capabilities,
)

if TYPE_CHECKING:  # the plug-ins' bases, for their lookups' types (asked by name)
    from servelab.plugins.front import Front
    from servelab.plugins.server import AppServer


def slicing_drivers() -> str:
    """The drivers that can measure in slices, as "the oha driver"."""
    names = [n for n in DRIVER_NAMES if "latencies" in capabilities(n)]
    return f"the {' or '.join(names)} driver"


def check_server(server: ServerSpec) -> None:
    """ValueError for a knob ``server``'s kind cannot honour."""
    get_server(server.kind).check_knobs(server)


def check_proxy(proxy: ProxySpec) -> None:
    """ValueError for what ``proxy``'s front cannot do: a unix socket without a front,
    a protocol it does not speak, another front's knobs."""
    front: Front = get_front(proxy.kind)
    if front.role is None and proxy.transport == "unix":
        raise ValueError(
            "transport 'unix' needs a proxy in front (load drivers speak TCP); "
            f"use proxy kind {_either(FRONTS.where(lambda f: f.role))}, "
            "or transport 'tcp'"
        )
    if proxy.protocol not in front.protocols:
        speakers = FRONTS.where(lambda f: proxy.protocol in f.protocols)
        raise ValueError(
            f"protocol {proxy.protocol!r} needs a front that speaks it (proxy kind "
            f"{_either(speakers)})"
        )
    front.check_knobs(proxy)


def check_pairing(stack: StackSpec) -> None:
    """ValueError when ``stack``'s server and front do not go together."""
    server: AppServer = get_server(stack.server.kind)
    if server.inside_front is not None:
        if stack.proxy.kind != server.inside_front:
            raise ValueError(
                f"server kind {server.kind!r} runs the app inside "
                f"{get_front(server.inside_front).title}; "
                f"set proxy kind {server.inside_front!r}"
            )
        if stack.proxy.upstream_keepalive:
            raise ValueError(
                f"upstream_keepalive does not apply to {server.kind} "
                f"({get_front(server.inside_front).title} "
                "reaches the app's processes itself, per request); set it to 0"
            )
    if stack.proxy.protocol not in server.protocols:
        speakers = SERVERS.where(lambda s: stack.proxy.protocol in s.protocols)
        raise ValueError(
            f"proxy protocol {stack.proxy.protocol!r} is spoken by {_either(speakers)} only, "
            f"not {stack.server.kind}; use protocol 'http'"
        )


def check_stack(stack: StackSpec) -> StackSpec:
    """``stack``, or ValueError with its first plug-in problem."""
    problems = stack_problems(stack, "stack")
    if problems:
        raise ValueError(first_of([p.partition(": ")[2] for p in problems]))
    return stack


def stack_problems(stack: StackSpec, where: str) -> list[str]:
    """Each plug-in problem of ``stack`` as 'where: what', in the order pydantic would
    meet them: the server's, the front's, then (both fine) their pairing."""
    problems = []
    try:
        check_server(stack.server)
    except ValueError as exc:
        problems.append(f"{where}.server: {exc}")
    try:
        check_proxy(stack.proxy)
    except ValueError as exc:
        problems.append(f"{where}.proxy: {exc}")
    if not problems:
        try:
            check_pairing(stack)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
    return problems


def experiment_problems(experiment: Experiment) -> list[str]:
    """Each plug-in problem of ``experiment`` as 'where: what': its stacks', then (those
    fine) its load driver's."""
    problems = stack_problems(experiment.baseline, "baseline")
    for index, variant in enumerate(experiment.variants):
        problems += stack_problems(variant, f"variants.{index}")
    if problems:
        return problems
    problem = _driver_problem(experiment)
    return [problem] if problem else []


def _driver_problem(experiment: Experiment) -> str | None:
    if experiment.driver_options:
        model = driver_class(experiment.driver).options_model
        if model is None:
            return f"value: load driver {experiment.driver} takes no driver_options"
        try:
            model.model_validate(experiment.driver_options)
        except ValidationError as exc:
            return describe_validation_error(exc)
    if experiment.slices > 1 and "latencies" not in capabilities(experiment.driver):
        return (
            f"value: slices need {slicing_drivers()} (it keeps every request's latency, so "
            "the slices' percentiles can be merged)"
        )
    if experiment.side_by_side and (
        experiment.slices == 1 or any(w.load.duration_s is None for w in experiment.workloads)
    ):
        return (
            f"value: side_by_side measures slices at the same time: it needs "
            f"{slicing_drivers()}, closed loads bounded by a duration, and more than one slice"
        )
    if experiment.stopping is not None and experiment.slices == 1:
        return (
            f"value: [stopping] adds interleaved rounds: it needs {slicing_drivers()}, closed "
            "loads and more than one slice"
        )
    return None


DEFAULT_FIX = "correct that value"


def checked(
    experiment: Experiment, source: str = "experiment", fix: str = DEFAULT_FIX
) -> Experiment:
    """``experiment``, checked against the plug-ins it names: SpecError
    ('source: where: what') with the first problem."""
    problems = experiment_problems(experiment)
    if problems:
        raise SpecError(f"{source}: {first_of(problems)}", fix)
    return experiment


@dataclass(frozen=True)
class Stage:
    """An experiment as one preparation step left it, and how a problem it brought is
    told: 'source: where: what' (``checked``) and the fix."""

    experiment: Experiment
    source: str
    fix: str = DEFAULT_FIX


def checked_stages(stages: Sequence[Stage]) -> Experiment:
    """The last stage's experiment, checked once against its plug-ins. When it has a
    problem, the first stage that has one is blamed, in its own words: the message is
    the one each step checking its own result would have given."""
    if experiment_problems(stages[-1].experiment):
        blame_earlier(stages)  # raises: the last one has a problem
    return stages[-1].experiment


def blame_earlier(stages: Sequence[Stage]) -> None:
    """SpecError for the first of ``stages`` with a plug-in problem; only looked for once
    a later one has a problem (or a step failed), so a good experiment is checked once."""
    for stage in stages:
        checked(stage.experiment, stage.source, stage.fix)


def describe_stack(stack: StackSpec) -> str:
    """One line: what serves, what fronts it, how they talk."""
    s, p = stack.server, stack.proxy
    server_impl: AppServer = get_server(s.kind)
    server = server_impl.describe(s)
    if s.max_requests:
        jitter = f"+0..{s.max_requests_jitter}" if s.max_requests_jitter else ""
        server += f" max_requests={s.max_requests}{jitter}"
    extra = f", somaxconn {stack.network.somaxconn}" if stack.network.somaxconn else ""
    front = get_front(p.kind).describe(p)
    if not front:
        return f"{server}, no proxy{extra}"
    if server_impl.inside_front is not None:
        return f"{front} + {server}{extra}"
    keepalive = (
        f"upstream keepalive {p.upstream_keepalive}"
        if p.upstream_keepalive
        else ("no upstream keepalive")
    )
    via = p.transport if p.protocol == "http" else f"{p.transport}/{p.protocol}"
    return f"{front} --{via}--> {server}, {keepalive}{extra}"


def _either(kinds: Sequence[str]) -> str:
    """'a', 'b' or 'c'."""
    quoted = [f"'{k}'" for k in kinds]
    return " or ".join([", ".join(quoted[:-1]), quoted[-1]]) if len(quoted) > 1 else quoted[0]
