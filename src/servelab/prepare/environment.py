"""Facts about the machine and tool versions, recorded with every experiment.

Each fact is declared once, in ``FACTS``: its key in the stored environment, how it
is collected, its label in reports and how it is shown there, and whether it
identifies the machine (results from different machines are not mixed). The versions
come from every front and app server (their registries), so the record stands above the
plug-ins; what it reads from the machine itself is servelab.host.facts.
"""

from __future__ import annotations

import os
import platform
import resource
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from servelab.host.facts import cpu_model, package_version, read_sysctl
from servelab.plugins.front import get_front
from servelab.plugins.server import get_server
from servelab.registry import PROCESS_FRONTS, SERVER_KINDS

Row = tuple[str, str]  # (label, value) as reports show it


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return "unknown" if value is None else str(value)


def _value_row(fact: Fact, value: Any, driver: str) -> list[Row]:
    return [(fact.label, _text(value))]


def _driver_row(fact: Fact, version: Any, driver: str) -> list[Row]:
    return [(fact.label, f"{driver} {version or ''}".strip())]


def _placement_rows(fact: Fact, plan: Any, driver: str) -> list[Row]:
    if not isinstance(plan, Mapping):
        return []
    stack, driver_cpus = plan.get("stack"), plan.get("driver")
    rows = [
        (
            fact.label,
            f"stack on CPUs {stack}, load driver on CPUs {driver_cpus}"
            if stack or driver_cpus
            else "not pinned",
        )
    ]
    if plan.get("side_by_side"):  # what the planner made of this machine's CPUs
        rows.append(("Side by side", plan["side_by_side"]))
    if plan.get("stack_quota"):
        rows.append(("CPU quota", f"stack capped at {plan['stack_quota']:g} CPUs of time"))
    if "cpu_priority" in plan:  # results from before it existed do not say
        rows.append(
            (
                "CPU priority",
                "stack and driver favoured over other processes (cgroup CPU weight)"
                if plan["cpu_priority"]
                else "none (other processes competed on equal terms)",
            )
        )
    return rows


def _app_python_rows(fact: Fact, pythons: Any, driver: str) -> list[Row]:
    """One row per interpreter that ran an app: path, version, servers and frameworks."""
    rows = []
    for python in pythons if isinstance(pythons, list) else []:
        used = {**python.get("packages", {}), **python.get("frameworks", {})}
        versions = ", ".join(f"{name} {version}" for name, version in used.items())
        rows.append(
            (fact.label, f"{python.get('path')} (Python {python.get('version')}"
             + (f"; {versions}" if versions else "") + ")")
        )
    return rows


def _app_versions_rows(fact: Fact, versions: Any, driver: str) -> list[Row]:
    """One row per version a check measured: its commit (and time), or its directory."""
    rows = []
    for role, version in (versions or {}).items() if isinstance(versions, dict) else ():
        commit = version.get("commit")
        said = (
            f"{commit[:10]} of {version.get('time', '?')}"
            + (" with uncommitted changes" if version.get("dirty") else "")
            if commit else str(version.get("dir"))
        )
        rows.append((f"{fact.label}: {role}", said))
    return rows


@dataclass(frozen=True)
class Fact:
    """One fact of every experiment's environment: its key in the stored dict, and how
    it is collected, compared and shown."""

    key: str
    label: str  # in reports
    # None: set by the run (driver_version, cpu_plan: ``servelab.session``) or by the
    # setup around it (database, app_python: ``servelab.api.Prepared.setup``).
    collect: Callable[[], Any] | None = None
    # Identifies the machine: results measured where it differs are not mixed (--resume
    # refuses, ``results compare`` says so).
    machine: bool = False
    # Its rows in reports, from its value and the experiment's load driver.
    shown_as: Callable[[Fact, Any, str], list[Row]] = _value_row
    shown_unrecorded: bool = False  # shown also when absent (the experiment names the driver)

    def rows(self, value: Any, driver: str) -> list[Row]:
        return self.shown_as(self, value, driver)


def _open_files_limit() -> list[int]:
    return list(resource.getrlimit(resource.RLIMIT_NOFILE))


def _package(name: str) -> Callable[[], str | None]:
    return lambda: package_version(name)


def _front_version(kind: str) -> Callable[[], str | None]:
    return lambda: get_front(kind).version()


def _server_version(kind: str) -> Callable[[], str | None]:
    return lambda: get_server(kind).version()


# In the order collected, stored and shown.
FACTS: tuple[Fact, ...] = (
    Fact("hostname", "Host", platform.node, machine=True),
    Fact("cpu_model", "CPU", cpu_model, machine=True),
    Fact("cpu_count", "CPUs", os.cpu_count, machine=True),
    Fact("cpus_usable", "CPUs usable", lambda: len(os.sched_getaffinity(0))),
    Fact("kernel", "Kernel", platform.release, machine=True),
    Fact("somaxconn", "net.core.somaxconn", lambda: read_sysctl("net.core.somaxconn")),
    Fact("open_files_limit", "Open files limit (soft, hard)", _open_files_limit),
    Fact("python", "Python", platform.python_version),
    # Every front's and app server's version, from their registries.
    *(Fact(kind, kind, _front_version(kind)) for kind in PROCESS_FRONTS),
    *(Fact(kind, kind, _server_version(kind)) for kind in SERVER_KINDS),
    Fact("fastapi", "FastAPI", _package("fastapi")),
    Fact("servelab", "servelab", _package("servelab")),
    Fact("database", "Database"),
    # The interpreters that ran the apps and their servers (servelab.apps.interpreter).
    Fact("app_python", "App's Python", shown_as=_app_python_rows),
    # The app's versions a check compared (servelab.check.versions.describe_version):
    # role -> commit, its time, uncommitted changes, directory; history reads them.
    Fact("app_versions", "App version", shown_as=_app_versions_rows),
    Fact("driver_version", "Load driver", shown_as=_driver_row, shown_unrecorded=True),
    Fact("cpu_plan", "CPU placement", shown_as=_placement_rows),
)
FACT_BY_KEY = {fact.key: fact for fact in FACTS}


def collect_environment(setup: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The machine's facts, with ``setup``: what was set up around the stacks for this
    experiment (e.g. the Django app's database and the link to it), handed in by whoever
    set it up (``servelab.api.Prepared.setup``). KeyError for a key no fact declares."""
    setup = dict(setup or {})
    for key in setup:
        if key not in FACT_BY_KEY:
            raise KeyError(f"{key!r} is not a fact of the environment (declare it in FACTS)")
    collected = {fact.key: fact.collect() for fact in FACTS if fact.collect is not None}
    return {**collected, **setup}


def machine_differences(first: Mapping[str, Any], second: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two recorded machines ([] when the same)."""
    return [
        f"{fact.key} {first.get(fact.key)!r} vs {second.get(fact.key)!r}"
        for fact in FACTS
        if fact.machine and first.get(fact.key) != second.get(fact.key)
    ]


def describe_environment(environment: Mapping[str, Any], driver: str) -> list[Row]:
    """(label, value) of the machine and tools a result was measured with (``driver``:
    its experiment's load driver); keys no fact declares (from other versions) last."""
    rows = [
        row
        for fact in FACTS
        if fact.key in environment or fact.shown_unrecorded
        for row in fact.rows(environment.get(fact.key), driver)
    ]
    others = sorted(environment.keys() - FACT_BY_KEY.keys())
    return rows + [(key, _text(environment[key])) for key in others]
