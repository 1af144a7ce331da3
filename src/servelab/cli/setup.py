"""`servelab setup`: the machine set up for the asked-for commands (servelab.setup)."""

from __future__ import annotations

import sys

import click
from rich.markup import escape

from servelab.cli.options import console, out
from servelab.errors import MissingToolError, SpecError
from servelab.host.parts import CORE, PARTS, parse_parts

PARTS_HELP = "\b\nParts (the core always):\n" + "\n".join(
    f"  {name:<10} {part.summary}" for name, part in {"core": CORE, **PARTS}.items()
)


def _parts(values: tuple[str, ...], every: bool) -> tuple[str, ...]:
    if every:
        return tuple(PARTS)
    try:
        return tuple(dict.fromkeys(name for value in values for name in parse_parts(value)))
    except ValueError as exc:
        raise SpecError(str(exc), "servelab setup --help lists the parts") from exc


@click.command(epilog=PARTS_HELP)
@click.option("--with", "with_parts", multiple=True, metavar="PART[,PART]",
              help="Also the optional PARTs (below), comma-separated or repeated.")
@click.option("--all", "every", is_flag=True, help="Every optional part.")
@click.option("--undo-acl", is_flag=True,
              help="Take back the www-data access that `--with apache` granted as root.")
def setup(with_parts: tuple[str, ...], every: bool, undo_acl: bool) -> None:
    """Install what servelab needs on this machine (Debian), idempotent.

    The core (nginx, ab, wrk, valgrind, the report's charts, oha built with cargo into
    servelab's cache) and the asked-for parts. As root it installs Debian's packages
    without starting or enabling the services they bring and never stops one that runs;
    without root it does the rest and prints the commands to run with sudo (exit 3).
    A line per step, with its time; the oha build takes minutes once, then the cache
    keeps it."""
    from servelab.setup.run import SetupReport, run_setup
    from servelab.setup.steps import Machine, SetupFailed, StepResult, undo_www_data

    def say(line: str) -> None:  # escaped: "psycopg[binary]" is a requirement, not markup
        console.print(f"[bold]setup:[/bold] {escape(line)}", highlight=False)

    def said(step: StepResult) -> None:
        colour = {"done": "green", "present": "dim", "todo": "yellow"}[step.state]
        state = {"done": "done", "present": "already there", "todo": "left to you"}[step.state]
        console.print(f"[bold]setup:[/bold] {step.name}: [{colour}]{state}[/] "
                      f"({step.seconds:.1f} s) {escape(step.detail)}", highlight=False)

    if undo_acl:
        said(undo_www_data(Machine(), say))
        return
    parts = _parts(with_parts, every)
    try:
        report: SetupReport = run_setup(parts, say, said=said)
    except SetupFailed as exc:
        fix = "fix what its output says and run `servelab setup` again (it resumes)"
        raise MissingToolError(exc.problem, fix, detail=exc.tail) from exc
    again = " ".join(["servelab setup", *(["--with", ",".join(parts)] if parts else [])])
    if report.left:
        out.print("Left to do: run these, then `" + again + "` again:", highlight=False)
        for command in report.commands:
            out.print(f"  {command}", highlight=False, markup=False)
        sys.exit(MissingToolError.exit_code)
    total = sum(step.seconds for step in report.steps)
    out.print(f"servelab is set up for: {', '.join(report.parts)} ({total:.0f} s)",
              highlight=False)
