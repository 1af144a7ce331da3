"""``servelab check``: the regression gate (see servelab.check)."""

from __future__ import annotations

import functools
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click
from rich.console import Console

from servelab.analysis.thresholds import DEFAULT_THRESHOLDS, EXIT_INCONCLUSIVE, METRIC_NAMES
from servelab.cli.how_to_run import run_options
from servelab.cli.options import console, out
from servelab.cli.replay import replay_options
from servelab.cli.user_app import app_options
from servelab.config.load import ReplaySpec
from servelab.config.run import RunOptions, UserApp
from servelab.config.stack import AppSpec
from servelab.config.thresholds import REPLAY_THRESHOLDS
from servelab.errors import ServelabError, SpecError
from servelab.registry import DEFAULT_SERVER, SERVER_KINDS

if TYPE_CHECKING:
    from servelab import api


def errors_shown_in_ci(command: Callable[..., None]) -> Callable[..., None]:
    """A check that cannot run (bad input, a missing tool) says why where CI looks, as well
    as in the log: its one line in the summary (--summary-md, $GITHUB_STEP_SUMMARY) and
    ``verdict=error`` in $GITHUB_OUTPUT. Outside the option wrappers, so that a bad
    --budget is told there too."""

    @functools.wraps(command)
    def shown(*args: Any, **kwargs: Any) -> None:
        try:
            command(*args, **kwargs)
        except ServelabError as exc:
            from servelab.check.outputs import write_error

            write_error(exc.one_line(), exc.exit_code, kwargs.get("summary_md"),
                        os.environ.get("GITHUB_STEP_SUMMARY"), os.environ.get("GITHUB_OUTPUT"))
            raise

    return shown


def threshold_lines(values: tuple[str, ...]) -> tuple[str, ...]:
    """Each --fail-if value's lines, blank ones left out: a CI input of several lines
    is a threshold per line."""
    return tuple(line.strip() for value in values for line in value.splitlines()
                 if line.strip())


@click.command()
@click.option(
    "--baseline-dir", type=click.Path(path_type=Path),
    help="The baseline version's app dir (the candidate is --app-dir).",
)
@click.option(
    "--baseline-ref",
    help="Or a git revision of the app dir's repository (branch, tag, commit), checked out "
    "into a temporary worktree and removed afterwards.",
)
@click.option(
    "--fail-if", "thresholds", multiple=True, metavar="THRESHOLD",
    help="Fail when the candidate's change crosses this, with confidence; repeatable. "
    f"Metrics: {', '.join(METRIC_NAMES)}. Default: "
    f"{' and '.join(repr(t) for t in DEFAULT_THRESHOLDS)}; with --replay "
    f"{' and '.join(repr(t) for t in REPLAY_THRESHOLDS)}. 'instructions > +5%' counts the "
    "app's instructions per request under valgrind instead of driving load (not moved by "
    "the machine's speed; not mixed with the others). A value of several lines is a "
    "threshold per line (a CI input).",
)
@click.option(
    "--inconclusive", type=click.Choice(["pass", "fail"]), default="fail", show_default=True,
    help=f"What an undecided threshold does: fail (exit {EXIT_INCONCLUSIVE}) or pass (exit 0).",
)
@click.option("--summary-md", type=click.Path(path_type=Path),
              help="Write the verdict table as GitHub-flavoured markdown.")
@click.option("--junit", type=click.Path(path_type=Path),
              help="Write JUnit XML: one test case per threshold.")
@click.option("--server", type=click.Choice(SERVER_KINDS), default=DEFAULT_SERVER,
              show_default=True, help="The app server serving both versions.")
@click.option("--workers", type=int, default=2, show_default=True)
@click.option("-c", "--concurrency", type=int, default=50, show_default=True)
@click.option("-d", "--duration", type=float, default=None,
              help="Seconds each version is measured per round, in slices of about 1 s "
                   "[default: 6 side by side, 3 in turns].")
@errors_shown_in_ci
@app_options
@replay_options
@run_options
def check(
    baseline_dir: Path | None,
    baseline_ref: str | None,
    thresholds: tuple[str, ...],
    inconclusive: Literal["pass", "fail"],
    summary_md: Path | None,
    junit: Path | None,
    server: str,
    workers: int,
    concurrency: int,
    duration: float | None,
    user: UserApp,
    replay: ReplaySpec | None,
    run: RunOptions,
) -> None:
    """Did the app get slower? Measure two versions of the app on the same stack (side by
    side where each gets CPUs of its own, else in turns) until one --fail-if threshold is
    crossed, every one is decided or --budget (default 3 min) is spent.

    Exit codes: 0 no threshold crossed, 1 one crossed (a significant change beyond it),
    10 still inconclusive (--inconclusive pass: 0), 2 bad input."""
    from servelab.check import CheckSpec, measuring_options, run_check
    from servelab.check.outputs import flame_path, summary_markdown, write_outputs

    thresholds = threshold_lines(thresholds)
    github_output = os.environ.get("GITHUB_OUTPUT")  # the step outputs, on GitHub Actions
    step_summary = check_outputs(("--summary-md", summary_md), ("--junit", junit),
                                 ("$GITHUB_OUTPUT", Path(github_output) if github_output else None))
    if workers < 1 or concurrency < 1:
        raise SpecError("--workers and --concurrency must be at least 1", "pass 1 or more")
    if duration is not None and not duration >= 2:
        raise SpecError(f"--duration must be at least 2 s, got {duration:g}",
                        "each version is measured in slices of about 1 s")
    spec = CheckSpec(
        app=user.app or AppSpec(ref="fastapi"),
        baseline_dir=baseline_dir,
        baseline_ref=baseline_ref,
        thresholds=tuple(thresholds) or (
            DEFAULT_THRESHOLDS if replay is None else REPLAY_THRESHOLDS
        ),
        inconclusive=inconclusive,
        server={"kind": server, "workers": workers},
        concurrency=concurrency,
        duration_s=duration,
        request=user.request,
        replay=replay,
    )
    if user.database_given:
        raise SpecError("servelab check does not take --database, --db-latency or --db-jitter",
                        "leave them out")
    options = measuring_options(spec, run)

    from servelab import api

    outcome = run_check(
        spec, options, say=api.saying(console),
        measure=measure_quietly, startup_timeout_s=user.startup_timeout_s,
    )
    flame = flame_path(outcome, summary_md, junit)
    out.print(summary_markdown(outcome, flame), markup=False, highlight=False)
    for path in write_outputs(outcome, summary_md, junit, step_summary, flame, github_output):
        console.print(f"servelab: wrote {path}", highlight=False)
    sys.exit(outcome.exit_code)


def check_outputs(*options: tuple[str, Path | None]) -> str | None:
    """Every output file given (option, path), and $GITHUB_STEP_SUMMARY when set, checked
    writable before anything starts (not a traceback after measuring); the step summary's
    path."""
    from servelab.results.outdir import check_writable_path

    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    summary = ("$GITHUB_STEP_SUMMARY", Path(step_summary) if step_summary else None)
    for option, path in (*options, summary):
        if path is not None:
            check_writable_path(path, option)
    return step_summary


def measure_quietly(ready: api.Prepared) -> Path:
    """A prepared check measured, its progress on stderr; stdout carries only the
    command's own table. Its result directory."""
    from servelab import api

    return api.run_prepared(ready, console=console, out=Console(file=io.StringIO())).path
