"""`servelab doctor`: is this machine ready to measure, and how to fix what is not. It
asks the machine, every registered front, load driver and app server, and servelab's own
services, so it stands above them all."""

from __future__ import annotations

import os
import resource

from servelab.errors import MissingToolError
from servelab.host.doctor import (
    SETUP_FIX,
    Check,
    check_program,
    cpu_priority_check,
    package_check,
    profiler_check,
)
from servelab.host.extras import extra_checks
from servelab.host.facts import read_sysctl
from servelab.host.netns import unavailable_reason
from servelab.host.paths import toxiproxy_server
from servelab.plugins.driver import get_driver
from servelab.plugins.front import get_front
from servelab.plugins.server import get_server
from servelab.registry import (
    DRIVER_NAMES,
    FRONT_KINDS,
    SERVER_KINDS,
)
from servelab.services.postgres import find_bindir
from servelab.services.slowlink import netem_probe


def run_checks() -> list[Check]:
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
    checks.append(check_program(  # --fail-if instructions (check, bisect)
        "valgrind", ["valgrind", "--version"], required=False,
        fix="apt-get install valgrind, or " + SETUP_FIX,
    ))
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


def postgres_check() -> Check:
    """PostgreSQL is optional: only the Django app's --database postgresql needs it."""
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


def registered_checks() -> list[Check]:
    """Each front's, load driver's and app server's own checks, in registry order."""
    checks = [c for kind in FRONT_KINDS for c in get_front(kind).doctor_checks()]
    checks += [c for name in DRIVER_NAMES for c in get_driver(name).doctor_checks()]
    checks += [c for kind in SERVER_KINDS for c in get_server(kind).doctor_checks()]
    return checks


def slow_link_check() -> Check:
    """--db-latency's tool: netem where the kernel has it, else toxiproxy (optional)."""
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
