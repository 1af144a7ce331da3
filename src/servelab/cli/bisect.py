"""``servelab bisect``: the commit that made the app slower (see servelab.history)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import click

from servelab.analysis.thresholds import DEFAULT_THRESHOLDS, METRIC_NAMES
from servelab.cli.check import check_outputs, measure_quietly
from servelab.cli.how_to_run import run_options
from servelab.cli.options import console, out
from servelab.cli.user_app import app_options
from servelab.config.run import RunOptions, UserApp
from servelab.errors import SpecError
from servelab.registry import DEFAULT_SERVER, SERVER_KINDS


@click.command()
@click.option("--good", help="A revision that was fast (branch, tag, commit).")
@click.option("--bad", default="HEAD", show_default=True,
              help="A later revision that is slower.")
@click.option("--lock-good", type=click.Path(path_type=Path),
              help="Instead of commits: a lock file (requirements-style, every package "
              "pinned) with which the app was fast; with --lock-bad.")
@click.option("--lock-bad", type=click.Path(path_type=Path),
              help="The lock file with which it is slower: which of their differences did it?")
@click.option("--wheelhouse", type=click.Path(path_type=Path),
              help="With --lock-good: install from this directory of wheels only (offline); "
              "default: the index pip is configured for.")
@click.option(
    "--fail-if", "thresholds", multiple=True, metavar="THRESHOLD",
    help="What counts as slower, as `servelab check` takes it; repeatable. Metrics: "
    f"{', '.join(METRIC_NAMES)}. Default: {' and '.join(repr(t) for t in DEFAULT_THRESHOLDS)}. "
    "'instructions > +5%' counts each commit's instructions per request under valgrind: "
    "steps decided at their first count, whatever the machine's speed.",
)
@click.option("--retries", type=int, default=1, show_default=True,
              help="An unknown step's check goes on for twice the last budget (its rounds "
              "kept), this many times.")
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
    good: str | None,
    bad: str,
    lock_good: Path | None,
    lock_bad: Path | None,
    wheelhouse: Path | None,
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
    never touched), deciding same / slower / unknown; an unknown step is measured further
    (--budget per step, default 90 s; --retries) rather than guessed.

    With --lock-good and --lock-bad: which dependency change made it slower? Each step a
    check of the app in the environment of the good lock with some of the two locks'
    differences applied (in order of name) against the good lock's, in virtualenvs of
    servelab's own, removed afterwards.

    Exit codes: 0 no change (the bad end is not slower), 1 the first slower commit (or
    change) found, 10 unresolved (a step stayed unknown), 2 bad input."""
    from servelab import api
    from servelab.check import CheckOutcome, CheckSpec, measuring_options
    from servelab.history.bisect import Step
    from servelab.history.outputs import junit_xml, outcome_json, short, summary_markdown
    from servelab.history.run import (
        EXIT_CODES,
        BisectSpec,
        LockBisectSpec,
        run_bisect,
        run_lock_bisect,
    )

    step_summary = check_outputs(
        ("--summary-md", summary_md), ("--json", json_path), ("--junit", junit)
    )
    locks = lock_good is not None or lock_bad is not None
    if locks and (lock_good is None or lock_bad is None):
        raise SpecError("--lock-good and --lock-bad go together", "give both lock files")
    if locks == (good is not None):
        raise SpecError("servelab bisect needs --good REV (commits) or --lock-good and "
                        "--lock-bad (lock files), one of the two",
                        "e.g. --good v1.4, or --lock-good old.txt --lock-bad new.txt")
    if wheelhouse is not None and not locks:
        raise SpecError("--wheelhouse is for lock files", "give --lock-good and --lock-bad")
    if user.app is None:
        raise SpecError("servelab bisect needs your app"
                        + ("" if locks else " in a git repository"),
                        "pass --app package.module:attr (and --app-dir)")
    if locks and user.app.python is not None:
        raise SpecError("--python does not go with --lock-good: each lock state gets an "
                        "environment of servelab's own", "leave --python out")
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
    options = measuring_options(check, run)

    def on_step(step: Step, outcome: CheckOutcome | None) -> None:
        console.print(
            f"servelab: step {short(step.commit)} (attempt {step.attempt}): {step.decision}; "
            f"{step.detail}", highlight=False, markup=False,
        )

    if lock_good is not None and lock_bad is not None:
        unit, start, end = "lock state", str(lock_good), str(lock_bad)
        outcome = run_lock_bisect(
            LockBisectSpec(check, lock_good, lock_bad, wheelhouse, retries), options,
            say=api.saying(console, once=True), measure=measure_quietly,
            startup_timeout_s=user.startup_timeout_s, on_step=on_step,
        )
    else:
        assert good is not None
        unit, start, end = "commit", good, bad
        outcome = run_bisect(
            BisectSpec(check, good, bad, retries), options, say=api.saying(console, once=True),
            measure=measure_quietly, startup_timeout_s=user.startup_timeout_s,
            on_step=on_step,
        )
    text = summary_markdown(outcome, start, end, unit)
    out.print(text, markup=False, highlight=False)
    for path, content in ((summary_md, text),
                          (json_path, outcome_json(outcome, start, end, unit)),
                          (junit, junit_xml(outcome, start, end, unit)),
                          (Path(step_summary) if step_summary else None, text)):
        if path is not None:
            mode: Literal["a", "w"] = "a" if path == Path(step_summary or "") else "w"
            with path.open(mode) as f:
                f.write(content)
            console.print(f"servelab: wrote {path}", highlight=False)
    sys.exit(EXIT_CODES[outcome.ending])
