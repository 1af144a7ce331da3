"""``servelab bisect``: the commit that made the app slower (see servelab.history)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Literal

import click

from servelab import api
from servelab.analysis.thresholds import DEFAULT_THRESHOLDS, METRIC_NAMES
from servelab.cli.check import check_outputs, measure_quietly
from servelab.cli.how_to_run import run_options
from servelab.cli.options import console, out
from servelab.cli.user_app import app_options
from servelab.config.run import RunOptions, UserApp
from servelab.errors import SpecError
from servelab.registry import DEFAULT_SERVER, SERVER_KINDS


@click.command()
@click.option("--good", required=True, help="A revision that was fast (branch, tag, commit).")
@click.option("--bad", default="HEAD", show_default=True,
              help="A later revision that is slower.")
@click.option(
    "--fail-if", "thresholds", multiple=True, metavar="THRESHOLD",
    help="What counts as slower, as `servelab check` takes it; repeatable. Metrics: "
    f"{', '.join(METRIC_NAMES)}. Default: {' and '.join(repr(t) for t in DEFAULT_THRESHOLDS)}.",
)
@click.option("--retries", type=int, default=1, show_default=True,
              help="An unknown step is checked again with twice the budget, this many times.")
@click.option("--summary-md", type=click.Path(path_type=Path),
              help="Write every step and the answer as GitHub-flavoured markdown.")
@click.option("--json", "json_path", type=click.Path(path_type=Path),
              help="Write every step and the answer as JSON.")
@click.option("--junit", type=click.Path(path_type=Path),
              help="Write JUnit XML: a test case per step (slower fails) and one for the "
              "answer (a first slower commit fails).")
@click.option("--server", type=click.Choice(SERVER_KINDS), default=DEFAULT_SERVER,
              show_default=True, help="The app server serving every version.")
@click.option("--workers", type=int, default=2, show_default=True)
@click.option("-c", "--concurrency", type=int, default=50, show_default=True)
@click.option("-d", "--duration", type=float, default=None,
              help="Seconds each version is measured per round (as `servelab check`).")
@app_options
@run_options
def bisect(
    good: str,
    bad: str,
    thresholds: tuple[str, ...],
    retries: int,
    summary_md: Path | None,
    json_path: Path | None,
    junit: Path | None,
    server: str,
    workers: int,
    concurrency: int,
    duration: float | None,
    user: UserApp,
    run: RunOptions,
) -> None:
    """Which commit made the app slower? Bisect from --good to --bad, each step a `servelab
    check` of one commit against the good one in temporary worktrees (your checkout is
    never touched), deciding same / slower / unknown; an unknown step is measured again
    with more budget (--budget per step, default 90 s) rather than guessed.

    Exit codes: 0 no change (the bad end is not slower), 1 the first slower commit found,
    10 unresolved (a step stayed unknown), 2 bad input."""
    from servelab.check import CheckOutcome, CheckSpec, check_experiment
    from servelab.history.bisect import Step
    from servelab.history.outputs import junit_xml, outcome_json, summary_markdown
    from servelab.history.run import EXIT_CODES, BisectSpec, run_bisect

    step_summary = check_outputs(
        ("--summary-md", summary_md), ("--json", json_path), ("--junit", junit)
    )
    if user.app is None:
        raise SpecError("servelab bisect needs your app in a git repository",
                        "pass --app package.module:attr (and --app-dir)")
    if workers < 1 or concurrency < 1 or retries < 0:
        raise SpecError("--workers and --concurrency must be at least 1, --retries 0 or more",
                        "pass 1 or more")
    if duration is not None and not duration >= 2:
        raise SpecError(f"--duration must be at least 2 s, got {duration:g}",
                        "each version is measured in slices of about 1 s")
    if user.database_given:
        raise SpecError("servelab bisect does not take --database, --db-latency or --db-jitter",
                        "leave them out")
    check = CheckSpec(
        app=user.app, thresholds=tuple(thresholds) or DEFAULT_THRESHOLDS,
        server={"kind": server, "workers": workers}, concurrency=concurrency,
        duration_s=duration, request=user.request,
    )
    options = run
    in_turns = api.in_turns_because(check_experiment(check, None), options)
    if in_turns:
        options = replace(options, side_by_side=False, notes=(*options.notes, in_turns))

    def on_step(step: Step, outcome: CheckOutcome) -> None:
        console.print(
            f"servelab: step {step.commit[:10]} (attempt {step.attempt}): {step.decision}; "
            f"{step.detail}", highlight=False, markup=False,
        )

    outcome = run_bisect(
        BisectSpec(check, good, bad, retries), options, say=api.saying(console),
        measure=measure_quietly, startup_timeout_s=user.startup_timeout_s, on_step=on_step,
    )
    text = summary_markdown(outcome, good, bad)
    out.print(text, markup=False, highlight=False)
    for path, content in ((summary_md, text), (json_path, outcome_json(outcome, good, bad)),
                          (junit, junit_xml(outcome, good, bad)),
                          (Path(step_summary) if step_summary else None, text)):
        if path is not None:
            mode: Literal["a", "w"] = "a" if path == Path(step_summary or "") else "w"
            with path.open(mode) as f:
                f.write(content)
            console.print(f"servelab: wrote {path}", highlight=False)
    sys.exit(EXIT_CODES[outcome.ending])
