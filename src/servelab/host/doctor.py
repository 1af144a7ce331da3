"""`servelab doctor`: is this machine ready to measure, and how to fix what is not."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from servelab.host.environment import package_version, program_version, read_sysctl
from servelab.host.paths import find_program

SETUP_FIX = "run `make setup` in the servelab checkout"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok", "warn", "fail"
    found: str
    fix: str = ""


def check_program(name: str, version_argv: list[str], *, required: bool, fix: str) -> Check:
    if find_program(name) is None:
        return Check(name, "fail" if required else "warn", "not found", fix)
    return Check(name, "ok", program_version(version_argv) or "found")


def run_checks() -> list[Check]:
    from servelab.host.extras import extra_checks  # it builds on Check

    checks = [
        check_program(
            "taskset",
            ["taskset", "--version"],
            required=True,
            fix="apt-get install util-linux (CPU pinning)",
        ),
    ]
    checks.extend(registered_checks())
    checks.append(package_check("fastapi"))  # the reference app
    checks.extend(extra_checks())
    checks.append(profiler_check())
    checks.append(postgres_check())
    checks.append(slow_link_check())
    somaxconn = read_sysctl("net.core.somaxconn")
    if somaxconn is None:
        checks.append(
            Check("net.core.somaxconn", "warn", "unreadable", "check /proc/sys/net/core/somaxconn")
        )
    elif int(somaxconn) < 1024:
        checks.append(
            Check(
                "net.core.somaxconn",
                "warn",
                somaxconn,
                "listen backlogs are capped at this; raise with "
                "`sysctl -w net.core.somaxconn=4096`",
            )
        )
    else:
        checks.append(Check("net.core.somaxconn", "ok", somaxconn))
    from servelab.host.netns import unavailable_reason

    no_netns = unavailable_reason()
    checks.append(
        Check(
            "network namespaces (somaxconn studies)",
            "warn" if no_netns else "ok",
            no_netns or "available",
            "run as root with iproute2; otherwise somaxconn is emulated by the app's backlog"
            if no_netns
            else "",
        )
    )
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    checks.append(
        Check(
            "open files limit",
            "ok" if soft >= 4096 else "warn",
            str(soft),
            "" if soft >= 4096 else "raise with `ulimit -n 65536` before running",
        )
    )
    cpus = len(os.sched_getaffinity(0))
    checks.append(
        Check(
            "usable CPUs",
            "ok" if cpus >= 2 else "warn",
            str(cpus),
            ""
            if cpus >= 2
            else "with one CPU the stack and the load driver share it; "
            "results say so, but compare only runs made alike",
        )
    )
    checks.append(cpu_priority_check())
    return checks


def cpu_priority_check() -> Check:
    """Whether the stack and the driver can be favoured over other processes (cgroup)."""
    from servelab.host.cgroups import quota_unavailable_reason

    name = "CPU priority (cgroup weight)"
    reason = quota_unavailable_reason()
    if reason is None:
        return Check(name, "ok", "available: stack and driver get 100x other processes' weight")
    return Check(
        name, "warn", f"unavailable: {reason}",
        "run as root to keep other programs from taking the stack's CPUs while it measures",
    )


def profiler_check() -> Check:
    """py-spy, for --profile: installed, and allowed to read other processes here."""
    from servelab.host.profiler import profiler_problem, py_spy

    name = "py-spy (--profile)"
    problem = profiler_problem()
    if problem is None:
        return Check(name, "ok", py_spy() or "found")
    found, _, fix = problem.removeprefix("no profiles: ").rpartition(" (fix: ")
    return Check(name, "warn", found, fix.removesuffix(")"))


def postgres_check() -> Check:
    """PostgreSQL is optional: only the Django app's --database postgresql needs it."""
    from servelab.errors import MissingToolError
    from servelab.services.postgres import find_bindir

    try:
        bindir = find_bindir()
    except MissingToolError:
        return Check(
            "postgresql (--database postgresql)",
            "warn",
            "not found",
            "apt-get install postgresql, or " + SETUP_FIX,
        )
    return Check("postgresql (--database postgresql)", "ok", f"{bindir.parent.name} ({bindir})")


def package_check(package: str, extra: str | None = None) -> Check:
    """A Python package in servelab's environment ("a|b": either): needed, or optional
    when servelab's ``extra`` installs it."""
    names = package.split("|")
    version = package_version(package)
    if version:
        return Check(f"python: {names[0]}", "ok", version)
    if extra:
        return Check(
            f"python: {names[0]}", "warn", f"not installed (optional: servelab[{extra}])",
            f"pip install 'servelab[{extra}]' to measure it (from a checkout: make setup)",
        )
    return Check(f"python: {names[0]}", "fail", "not installed", SETUP_FIX)


def registered_checks() -> list[Check]:
    """Each front's, load driver's and app server's own checks, in registry order."""
    from servelab.fronts.registry import FRONT_KINDS, get_front
    from servelab.load.registry import DRIVER_NAMES, get_driver
    from servelab.servers.registry import SERVER_KINDS, get_server

    checks = [c for kind in FRONT_KINDS for c in get_front(kind).doctor_checks()]
    checks += [c for name in DRIVER_NAMES for c in get_driver(name).doctor_checks()]
    checks += [c for kind in SERVER_KINDS for c in get_server(kind).doctor_checks()]
    return checks


def slow_link_check() -> Check:
    """--db-latency's tool: netem where the kernel has it, else toxiproxy (optional)."""
    from servelab.host.paths import toxiproxy_server
    from servelab.services.slowlink import netem_probe

    name = "slow database link (--db-latency)"
    no_netem = netem_probe()
    if no_netem is None:
        return Check(name, "ok", "netem (kernel qdisc)")
    toxiproxy = toxiproxy_server()
    if toxiproxy is None:
        return Check(
            name,
            "warn",
            f"no netem ({no_netem}), no toxiproxy",
            SETUP_FIX + " (builds toxiproxy with go)",
        )
    path, version = toxiproxy
    return Check(name, "ok", f"toxiproxy {version or ''} ({path}); no netem: {no_netem}")


def print_checks(console: Console, checks: list[Check]) -> None:
    table = Table(title="servelab doctor", title_justify="left")
    for column in ("check", "status", "found", "fix"):
        table.add_column(column)
    colours = {"ok": "green", "warn": "yellow", "fail": "red"}
    for check in checks:
        table.add_row(
            escape(check.name), f"[{colours[check.status]}]{check.status}[/]",
            escape(check.found), escape(check.fix),
        )
    console.print(table)
