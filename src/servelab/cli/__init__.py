"""Command line: parses options and calls the library. No measuring logic here.

One module per group of commands (measure.py, stored.py); the measuring options in
how_to_run.py (RunOptions) and user_app.py (UserApp), the consoles and the small shared
options in options.py.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import traceback
from types import FrameType
from typing import Any, NoReturn

import click
from rich.markup import escape

from servelab import __version__
from servelab.cli import bisect, capacity, check, history, measure, setup, stored, traffic, tune
from servelab.cli.options import console, errors, out
from servelab.errors import ServelabError


class ServelabGroup(click.Group):
    """A user's mistake (a ServelabError) ends as one line and its exit code, never a
    traceback; here rather than in ``main`` so that in-process callers (click's
    CliRunner) see what the shell sees."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ServelabError as exc:
            print_error(exc)
            ctx.exit(exc.exit_code)
        except click.UsageError as exc:  # a bad option value: one line too, with the fix
            print_usage_error(exc)
            ctx.exit(exc.exit_code)


def print_usage_error(exc: click.UsageError) -> None:
    command = exc.ctx.command_path.replace("cli", "servelab", 1) if exc.ctx else "servelab"
    line = escape(" ".join(exc.format_message().split()))
    errors.print(
        f"[bold red]servelab: error:[/bold red] {line} (fix: see `{command} --help`)",
        highlight=False,
    )


def print_error(exc: ServelabError) -> None:
    # escape: a message naming a TOML table ("[database]") is text, not rich markup.
    line = escape(exc.one_line())
    errors.print(f"[bold red]servelab: error:[/bold red] {line}", highlight=False)
    if exc.detail:
        errors.print(exc.detail, highlight=False, markup=False)


@click.group(
    cls=ServelabGroup,
    # Every option also from SERVELAB_<COMMAND>_<OPTION> (--results: SERVELAB_RESULTS).
    context_settings={"auto_envvar_prefix": "SERVELAB", "help_option_names": ["-h", "--help"]},
)
@click.version_option(version=__version__, prog_name="servelab")  # also from a checkout
@click.option("-q", "--quiet", is_flag=True, help="Only results and errors: no progress, no notes.")
@click.option("-v", "--verbose", is_flag=True,
              help="The whole report on the terminal (a study's per-variant tables, failures, "
              "method, environment) and a line per finished run, not only the summary and the "
              "Answer; also say every command line servelab starts (servers, fronts, drivers).")
def cli(quiet: bool, verbose: bool) -> None:
    """Measure how to serve a Python web app on this machine."""
    from servelab.host import procs

    console.quiet = quiet
    procs.announce_start = (
        (lambda name, argv: console.print(
            f"servelab: starting {name}: {shlex.join(argv)}", highlight=False, markup=False
        ))
        if verbose else None
    )



for command in (measure.studies, measure.study, measure.run, measure.ramp, capacity.capacity,
                check.check, bisect.bisect, history.history, tune.tune, traffic.traffic,
                measure.locust_worker, stored.results, stored.report, stored.export,
                setup.setup):
    cli.add_command(command)


@cli.command()
@click.argument("name", required=False)
def example(name: str | None) -> None:
    """Print the example experiment file NAME (without NAME: list them).

    Save one and edit it: `servelab example port-vs-socket > exp.toml`, then
    `servelab run exp.toml`."""
    from servelab.config.examples import example_names, example_text

    if name is None:
        for known in example_names():
            out.print(known, highlight=False)
        return
    click.echo(example_text(name), nl=False)


@cli.command()
def doctor() -> None:
    """Check this machine: nginx, load drivers, somaxconn, open files, CPUs."""
    from servelab.host.doctor import print_checks
    from servelab.prepare.doctor import run_checks

    checks = run_checks()
    print_checks(out, checks)
    if any(c.status == "fail" for c in checks):
        sys.exit(1)


# The signal that interrupted servelab: its exit code is 128 + that number (SIGINT 130,
# SIGTERM 143), as a shell reports a process ended by it.
_interrupted_by = {"signal": int(signal.SIGINT)}


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    """SIGTERM unwinds like Ctrl-C (every context manager stops its processes)."""
    _interrupted_by["signal"] = signum
    raise KeyboardInterrupt


def _raise_again(signum: int, frame: FrameType | None) -> NoReturn:
    """The re-delivered interrupt (see ``_interrupt_later``): the signal it stands for
    is already recorded."""
    raise KeyboardInterrupt


# How long after a swallowed interrupt it is raised again: long enough for the callback
# that swallowed it to have returned, short against a person waiting on Ctrl-C.
REDELIVER_S = 0.05


def _interrupt_later(unraisable: Any) -> None:
    """``sys.unraisablehook``: an interrupt that landed where Python ignores exceptions (a
    weakref callback, a ``__del__``) is raised again ``REDELIVER_S`` later, where it
    unwinds, instead of being printed as a traceback and lost (servelab went on measuring
    after a Ctrl-C: the tune Ctrl-C test, session 26). Anything else is printed as
    Python does."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        signal.setitimer(signal.ITIMER_REAL, REDELIVER_S)
        return
    sys.__unraisablehook__(unraisable)


# sysexits.h's EX_SOFTWARE: not 1, which `servelab check` and `results compare --fail-on`
# give a regression.
INTERNAL_ERROR = 70


def exit_now(code: int) -> NoReturn:
    """Exit with ``code`` once everything is stopped and written, skipping the interpreter's
    own shutdown. CPython 3.11 run as ``python -m`` remembers a KeyboardInterrupt that went
    through any ``exec`` of a string (a dataclass or namedtuple being created by a lazy
    import, say scipy's) even after it was handled, and at exit kills itself with SIGINT:
    exit -2 instead of 130 (the tune Ctrl-C test's flake, sessions 7-11)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    """Entry point: user errors are one line and an exit code, never a traceback."""
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    signal.signal(signal.SIGALRM, _raise_again)
    sys.unraisablehook = _interrupt_later
    try:
        code = cli.main(standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        # click turns Ctrl-C (and our SIGTERM) into Abort; context managers have stopped
        # every process by the time it gets here. Ignore further signals first: a second
        # one (Ctrl-C pressed twice) arriving while the message is printed would raise
        # KeyboardInterrupt out of this block.
        for ignored in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
            signal.signal(ignored, signal.SIG_IGN)
        name = signal.Signals(_interrupted_by["signal"]).name
        console.print(f"servelab: interrupted ({name}); every process it started was stopped")
        exit_now(128 + _interrupted_by["signal"])
    except click.UsageError as exc:  # e.g. an unknown command
        print_usage_error(exc)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except ServelabError as exc:  # raised outside a command (e.g. while parsing)
        print_error(exc)
        sys.exit(exc.exit_code)
    except Exception:  # a bug in servelab: its traceback, and a code no verdict uses
        traceback.print_exc()
        console.print("servelab: internal error (a bug in servelab; the traceback above says "
                      "where); nothing measured so far is lost", highlight=False)
        sys.exit(INTERNAL_ERROR)
    sys.exit(code if isinstance(code, int) else 0)
