"""``servelab history``: the app's figures across its commits, from the checks stored in
--results (see servelab.history)."""

from __future__ import annotations

from pathlib import Path

import click

from servelab.cli.options import console, out
from servelab.errors import SpecError


@click.command()
@click.option("--results", "results_dir", type=click.Path(path_type=Path),
              default=Path("results"), show_default=True,
              help="The results directory the checks were stored in.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Where history.html and history.md go [default: RESULTS/history].")
@click.option("--metric", "metrics", type=click.Choice(["rps", "rps_per_cpu", "instructions"]),
              multiple=True,
              help="Figures to follow (repeatable): requests/s, requests per CPU second of "
              "the stack, the app's instructions per request (checks on --fail-if "
              "instructions) [default: each the results hold].")
@click.option("--known", multiple=True, metavar="REV=REASON",
              help="A change you know of (an upgrade, a new machine), shown with its reason; "
                   "repeatable.")
@click.option("--false-alarms", type=float, default=None,
              help="False change points allowed per 100 unchanged commits [default: 0.2].")
def history(
    results_dir: Path, out_dir: Path | None, metrics: tuple[str, ...], known: tuple[str, ...],
    false_alarms: float | None,
) -> None:
    """The app's history: every stored `servelab check` gives a figure for each commit it
    measured; per machine, workload and metric, the series over commits, the noise band
    from commits checked more than once, and the change points, written as one
    self-contained HTML page and its markdown summary."""
    from servelab.check.instructions import RESULTS_SUBDIR
    from servelab.history.changes import DEFAULT_FALSE_ALARMS
    from servelab.history.flames import change_flames
    from servelab.history.page import write_page
    from servelab.history.series import HISTORY_METRICS, METRICS, build_series, read_points
    from servelab.results.database import DB_FILE

    marked = {}
    for item in known:
        rev, sep, reason = item.partition("=")
        if not sep or not rev.strip() or not reason.strip():
            raise SpecError(f"--known {item!r} is not REV=REASON", "e.g. --known a1b2c3=upgraded")
        marked[rev.strip()] = reason.strip()
    from servelab.results.outdir import check_writable_path

    target = out_dir or results_dir / "history"
    check_writable_path(target, "--out", directory=True)  # before anything is read
    rate = DEFAULT_FALSE_ALARMS if false_alarms is None else false_alarms
    if not 0 < rate < 50:
        raise SpecError(f"--false-alarms must be between 0 and 50, got {rate:g}", "e.g. 0.2")
    if not (results_dir / DB_FILE).is_file() and not (results_dir / RESULTS_SUBDIR).is_dir():
        raise SpecError(f"no servelab results in {results_dir} (no {DB_FILE})",
                        "pass --results DIR where `servelab check` stored its results")
    series = []
    for key in metrics or HISTORY_METRICS:
        metric = METRICS[key]
        for (machine, workload), points in sorted(read_points(results_dir, metric).items()):
            series.append((build_series(machine, workload, metric, points, rate), points))
    if not series:
        raise SpecError(f"no finished check in {results_dir} names a committed version",
                        "run `servelab check` on an app in a git repository first")
    machines = {s.machine for s, _ in series}
    if len(machines) > 1:
        console.print(f"servelab: {len(machines)} machines in these results: one series each, "
                      "never mixed", highlight=False)
    target.mkdir(parents=True, exist_ok=True)
    flames = change_flames(results_dir, series, target)
    markdown, page = write_page([s for s, _ in series], marked, rate, flames)
    (target / "history.md").write_text(markdown)
    (target / "history.html").write_text(page)
    out.print(markdown, markup=False, highlight=False)
    console.print(f"servelab: wrote {target / 'history.html'} and history.md", highlight=False)
