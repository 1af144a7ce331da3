"""`servelab doctor`'s parts on the machine's floor: a check's record, and the checks that
ask the machine itself (programs, packages, cgroups, py-spy). The whole doctor, which
asks every plug-in and service too, is servelab.prepare.doctor."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from servelab.host.facts import package_version, program_version
from servelab.host.parts import part_with_extra, setup_command
from servelab.host.paths import find_program

SETUP_FIX = "run `servelab setup`"


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
            f"{setup_command(part_with_extra(extra))} to measure it",
        )
    return Check(f"python: {names[0]}", "fail", "not installed", SETUP_FIX)


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
