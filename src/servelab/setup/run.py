"""The order of a set-up: Debian's packages first (the toolchains and the headers the
others build with), then servelab's Python extras, then the tools built into the cache,
last mod_wsgi's access. Each step is timed and said as it ends."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

from servelab.host.parts import OHA_CRATE, chosen
from servelab.host.paths import go_tool_path
from servelab.setup.steps import (
    CARGO_PACKAGES,
    Machine,
    Say,
    StepResult,
    build_go_tool,
    build_oha,
    executable,
    find_cargo,
    find_go,
    go_tools,
    grant_www_data,
    install_debian,
    install_extras,
    oha_built,
)


@dataclass(frozen=True)
class SetupReport:
    parts: tuple[str, ...]
    steps: tuple[StepResult, ...]

    @property
    def left(self) -> tuple[StepResult, ...]:
        """The steps left to the user (root needed, or a toolchain not there yet)."""
        return tuple(step for step in self.steps if step.state == "todo")

    @property
    def commands(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for step in self.left for c in step.commands))


def _timed(step: Callable[[], StepResult], said: Callable[[StepResult], None]) -> StepResult:
    started = time.monotonic()
    result = dataclasses.replace(step(), seconds=time.monotonic() - started)
    said(result)
    return result


def run_setup(parts: tuple[str, ...], say: Say, *,
              said: Callable[[StepResult], None] | None = None,
              machine: Machine | None = None) -> SetupReport:
    """Set up the core and ``parts``; ``say`` tells what a long step is doing, ``said``
    gets each step as it ends."""
    machine = machine or Machine()
    told = said or (lambda result: None)
    wanted = chosen(parts)
    names = tuple(part.name for part in wanted)
    builds = [build for part in wanted for build in part.builds]
    tools = go_tools()
    debian = [package for part in wanted for package in part.debian]
    if OHA_CRATE in builds and not oha_built():
        debian.append("make")  # oha's jemalloc is built with make (tikv-jemalloc-sys)
        if find_cargo() is None:
            debian.append(CARGO_PACKAGES)
    go_needed = any(build in tools and not executable(go_tool_path(tools[build].binary))
                    for build in builds)
    if go_needed and find_go() is None:
        debian.append("golang-go")

    steps = [_timed(lambda: install_debian(machine, debian, say), told)]
    debian_left = steps[0].state == "todo"
    extras = tuple(extra for part in wanted for extra in part.extras)
    # mod_wsgi compiles against apache2-dev: it waits for Debian's packages.
    blocked = debian_left and any(part.extras_need_debian for part in wanted)
    steps.append(_timed(lambda: install_extras(machine, extras, say, blocked=blocked), told))
    if OHA_CRATE in builds:
        steps.append(_timed(lambda: build_oha(machine, say), told))
    for build in builds:
        if build in tools:
            steps.append(_timed(functools.partial(build_go_tool, machine, tools[build], say),
                                told))
    if any(part.extras_need_debian for part in wanted):  # mod_wsgi's daemons
        steps.append(_timed(lambda: grant_www_data(machine, say), told))
    return SetupReport(names, tuple(steps))
