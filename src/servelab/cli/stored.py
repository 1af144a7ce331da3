"""The commands over stored results: results list/show/compare, report, export."""


from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import click
from rich.table import Table

from servelab.cli.options import complete_result, min_effect_option, out, results_dir_option
from servelab.errors import ServelabError


@click.group()
def results() -> None:
    """Stored results: list, show, compare."""


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of tables."
)


@results.command("list")
@results_dir_option
@json_option
def results_list(results_dir: Path, as_json: bool) -> None:
    """List the experiments stored in --results."""
    from servelab.results.database import DB_FILE, Database

    with contextlib.closing(Database(results_dir / DB_FILE)) as database:
        rows = database.list_experiments()
    if as_json:
        import dataclasses

        click.echo(json.dumps([dataclasses.asdict(row) for row in rows], indent=2, default=str))
        return
    table = Table(title=f"results in {results_dir / DB_FILE}", title_justify="left")
    for column in ("id", "name", "started", "runs", "state", "machine", "directory"):
        table.add_column(column)
    for row in rows:
        state = "finished" if row.finished_at else "unfinished (--resume)"
        table.add_row(
            str(row.id),
            row.name,
            row.created_at,
            f"{row.runs}/{row.planned}",
            state,
            row.hostname,
            row.experiment_dir,
        )
    out.print(table)


@results.command("merge")
@click.argument("other", type=click.Path(path_type=Path))
@results_dir_option
def results_merge(other: Path, results_dir: Path) -> None:
    """Merge the results directory OTHER (a CI run's artifact, say) into --results: every
    experiment not yet there is copied with its runs and files under a new id; one
    already there (same name, start, spec and machine) is not copied twice. OTHER is
    only read."""
    from servelab.results.database import DB_FILE, Database

    if other.resolve() == results_dir.resolve():
        raise ServelabError(f"{other} is --results itself", "merge another results directory")
    theirs = Database(other / DB_FILE)  # refused in one line if it is none, or damaged
    try:
        # Closed here, not left to the garbage collector: an open connection keeps
        # SQLite's -wal and -shm files beside the database.
        with contextlib.closing(Database(results_dir / DB_FILE, create=True)) as ours:
            added, skipped = ours.merge_from(theirs)
    finally:
        theirs.close()
    for their_id, new_id in added:
        out.print(f"#{their_id} of {other} -> #{new_id}", highlight=False)
    out.print(f"merged {len(added)} experiment(s) into {results_dir}; {skipped} already there",
              highlight=False)


@results.command("show")
@click.argument("result", shell_complete=complete_result)
@results_dir_option
@min_effect_option
@json_option
@click.option(
    "--precision",
    "precision_pct",
    type=float,
    default=None,
    help="The precision a comparison must reach to be clear (default: the experiment's, or 5).",
)
def results_show(
    result: str, results_dir: Path, min_effect: float, as_json: bool, precision_pct: float | None
) -> None:
    """Print the tables, verdicts and warnings of RESULT (an id or a results directory)."""
    from servelab.results.store import resolve_result
    from servelab.session import render_tables

    store = resolve_result(result, results_dir)
    if as_json:
        from servelab.analysis.analyze import analyze, comparisons_document

        analysis = analyze(store.experiment, store.runs(), min_effect_pct=min_effect)
        document = comparisons_document(analysis, precision_pct, min_effect)
        click.echo(json.dumps(document, indent=2))
        return
    from servelab.results.profiles import read_profiles

    runs = store.runs()
    render_tables(
        out, store.experiment, runs, environment=store.environment,
        min_effect_pct=min_effect, profiles=read_profiles(store.path, runs),
    )


@results.command("compare")
@click.argument("first", shell_complete=complete_result)
@click.argument("second", shell_complete=complete_result)
@results_dir_option
@min_effect_option
@click.option(
    "--allow-other-machine", is_flag=True, help="Compare results from different machines anyway."
)
@json_option
@click.option(
    "--fail-on", type=click.Choice(["worse"]), default=None,
    help="Exit 1 when a variant of SECOND is significantly worse than in FIRST on its answer's "
    "metric (requests/s; per CPU second side by side) "
    "(10 when a comparison is inconclusive, as `servelab check` does).",
)
def results_compare(
    first: str, second: str, results_dir: Path, min_effect: float, allow_other_machine: bool,
    as_json: bool, fail_on: str | None,
) -> None:
    """Compare each variant of SECOND against the same variant of FIRST."""
    from servelab.analysis.comparisons import compare_results, verdict_line
    from servelab.analysis.metrics import METRIC_BY_KEY, answer_metric
    from servelab.analysis.thresholds import EXIT_FAIL, EXIT_INCONCLUSIVE
    from servelab.analysis.validity import as_measured
    from servelab.prepare.environment import machine_differences
    from servelab.results.store import resolve_result

    a, b = resolve_result(first, results_dir), resolve_result(second, results_dir)
    differences = machine_differences(a.environment, b.environment)
    if differences and not allow_other_machine:
        raise ServelabError(
            f"{first} and {second} were measured on different machines ({'; '.join(differences)})",
            "compare results from one machine, or pass --allow-other-machine",
        )
    second_runs = b.runs()
    judged_in, _ = as_measured(b.experiment, second_runs)
    pairs = compare_results(
        a.runs(), second_runs, min_effect_pct=min_effect, experiment=judged_in
    )
    if not pairs:
        raise ServelabError(
            f"{first} and {second} share no (variant, workload)",
            "compare results of the same study or experiment file",
        )
    if as_json:
        click.echo(json.dumps([
            {"workload": workload, "variant": variant, "metric": key,
             "first_mean": c.baseline_mean, "second_mean": c.variant_mean,
             "change_pct": c.difference_pct,
             "interval_pct": list(c.interval_pct) if c.interval_pct else None,
             "p_value": c.p_value, "verdict": c.verdict, "test": c.test}
            for (workload, variant), comparisons in pairs.items()
            for key, c in comparisons.items()
        ], indent=2))
    else:
        for (workload, variant), comparisons in pairs.items():
            out.rule(f"[bold]{workload} / {variant}: {second} against {first}")
            for key, comparison in comparisons.items():
                out.print(f"  {verdict_line(METRIC_BY_KEY[key], comparison)}", highlight=False)
    if fail_on == "worse":
        key = answer_metric(judged_in).key  # the answer's metric, as its report judges
        verdicts = {comparisons[key].verdict for comparisons in pairs.values()}
        if "worse" in verdicts:
            sys.exit(EXIT_FAIL)
        if "inconclusive" in verdicts:
            sys.exit(EXIT_INCONCLUSIVE)


@click.command()
@click.argument("result", shell_complete=complete_result)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the report goes (default: RESULT's directory/report).",
)
@results_dir_option
@click.option("--overwrite", is_flag=True, help="Replace the report's files in a non-empty --out.")
@click.option(
    "--screenshot", is_flag=True, help="Also open the HTML in headless Chromium; save report.png."
)
def report(
    result: str, out_dir: Path | None, results_dir: Path, overwrite: bool, screenshot: bool
) -> None:
    """Write RESULT's report: markdown, HTML, SVG/PNG charts, JSON and CSV of every run.

    RESULT is an id (`servelab results list`) or a results directory.
    """
    from servelab.report.files import report_result
    from servelab.results.outdir import check_out_dir

    if out_dir is not None:  # before reading the result: one line, nothing started
        check_out_dir(out_dir, force=overwrite)
    paths = report_result(
        result, results_root=results_dir, out_dir=out_dir, force=overwrite, screenshot=screenshot
    )
    for path in paths:
        out.print(str(path), highlight=False)


@click.command("export")
@click.argument("result", shell_complete=complete_result)
@click.option(
    "--variant",
    default="best",
    show_default=True,
    help="'best' (fastest without errors, significantly better than the baseline) or a name.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the files go (default: RESULT's directory/export).",
)
@results_dir_option
@click.option(
    "--name",
    default="webapp",
    show_default=True,
    help="Deployment name: app user, socket group NAME-sock, units, /etc/NAME, /run/NAME.",
)
@click.option(
    "--listen", default="80", show_default=True, help="The front's listen address."
)
@click.option("--overwrite", is_flag=True, help="Replace the exported files in a non-empty --out.")
@click.option(
    "--no-check",
    is_flag=True,
    help="Skip the front's and the app server's checks and the boot (app not here).",
)
def export(
    result: str,
    variant: str,
    out_dir: Path | None,
    results_dir: Path,
    name: str,
    listen: str,
    overwrite: bool,
    no_check: bool,
) -> None:
    """Write the deployable configuration of RESULT's best (or --variant NAME) stack."""
    from servelab.export import export_result
    from servelab.export.choose import BEST, NoClearWinnerError
    from servelab.report.base import load_result
    from servelab.results.outdir import check_out_dir
    from servelab.tune.report import recommended_in, undecided_in

    if out_dir is not None:  # before anything is rendered, checked or booted
        check_out_dir(out_dir, force=overwrite)
    report_input, result_dir, label = load_result(result, results_dir)
    undecided = undecided_in(result_dir) if variant == BEST else None
    if undecided:  # a tune that could not tell its leaders apart: no pick from noise
        raise NoClearWinnerError(
            f"no clear winner in {label}: servelab tune recommends none yet ({undecided})",
            "export one of them by name with --variant NAME, or run the tune again with the "
            "budget it names",
        )
    outcome = export_result(
        report_input,
        variant,
        out_dir or result_dir / "export",
        source=label,
        name=name,
        listen=listen,
        force=overwrite,
        check=not no_check,
        recommended=recommended_in(result_dir),  # a tune result: what it recommends
    )
    out.print(f"[bold]{outcome.choice.name}[/bold]: {outcome.choice.reason}", highlight=False)
    for check in outcome.checks:
        out.print(f"checked: {check}", highlight=False)
    for path in outcome.paths:
        out.print(str(path), highlight=False)


