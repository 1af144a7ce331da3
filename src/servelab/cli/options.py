"""The consoles the commands print to, and the small options several commands share
(lists of numbers, the failure-mode studies' options, --results and --min-effect of the
stored results, completions). The measuring options are ``how_to_run`` (RunOptions) and
``user_app`` (UserApp)."""


from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from servelab.config.run import DEFAULT_RESULTS_DIR
from servelab.errors import SpecError
from servelab.host.netns import check_somaxconn

console = Console(stderr=True, soft_wrap=True)  # an error stays one line, however long
# Errors go here: -q silences ``console`` (progress, notes), never an error.
errors = Console(stderr=True, soft_wrap=True)
out = Console()
if not out.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
    # Piped or redirected: wide enough that the seed tables do not wrap (COLUMNS, when
    # set, is the width asked for, as on a terminal).
    out.width = 160


# More values than this in one list would be more variants than anyone measures.
MAX_LIST_VALUES = 64


def parse_int_list(text: str | None, what: str) -> tuple[int, ...] | None:
    """'1-3,5' -> (1, 2, 3, 5); values must be >= 1."""
    if text is None:
        return None
    values: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                if high < low:
                    raise SpecError(
                        f"{what} range {part!r} runs backwards",
                        f"write it low-high: '{high}-{low}'",
                    )
                if high - low >= MAX_LIST_VALUES:
                    raise SpecError(
                        f"{what} range {part!r} has {high - low + 1} values; at most "
                        f"{MAX_LIST_VALUES} are measured",
                        "give a shorter range, or a list such as '1,2,4,8'",
                    )
                values.extend(range(low, high + 1))
            else:
                values.append(int(part))
    except ValueError:
        raise SpecError(f"invalid {what} list {text!r}", "write e.g. '1-5' or '1,2,4'") from None
    if len(values) > MAX_LIST_VALUES:
        raise SpecError(
            f"{what} list {text!r} has {len(values)} values; at most {MAX_LIST_VALUES}",
            "measure fewer values at a time",
        )
    if not values or min(values) < 1:
        raise SpecError(f"{what} must be 1 or more, got {text!r}", "write e.g. '1-5' or '1,2,4'")
    return tuple(values)


# A click command's callback, before the options' decorators turn it into a command.
Callback = TypeVar("Callback", bound=Callable[..., Any])


_failure_options = [
    click.option("--rate", type=float, help="Arrival rate, requests/s (backlog, recycling)."),
    click.option("--sleep", type=float, help="Seconds the sleepy app holds a worker (backlog)."),
    click.option("--somaxconn", help="net.core.somaxconn values, e.g. '128,1024' (backlog)."),
    click.option(
        "--netns",
        type=click.Choice(["auto", "require", "off"]),
        help="Private network namespace for somaxconn: auto (default), require, or off "
        "(emulate it with the app's backlog).",
    ),
    click.option("--timeout", type=float, help="Per-request timeout of the load driver [s]."),
]


def failure_options(func: Callback) -> Callback:
    for option in reversed(_failure_options):
        func = option(func)
    return func


def failure_study_options(
    rate: float | None,
    sleep: float | None,
    somaxconn: str | None,
    netns: str | None,
    timeout: float | None,
) -> dict[str, Any]:
    """StudyOptions fields of the failure-mode studies, from their CLI options."""
    try:
        values = tuple(int(v) for v in somaxconn.split(",")) if somaxconn else None
    except ValueError:
        raise SpecError(
            f"invalid --somaxconn list {somaxconn!r}", "write values with commas, e.g. '128,1024'"
        ) from None
    for label, value in (("--rate", rate), ("--sleep", sleep), ("--timeout", timeout)):
        if value is not None and not value > 0:
            raise SpecError(f"{label} must be positive, got {value:g}", f"pass {label} > 0")
    if values:
        for value in values:
            check_somaxconn(value)
    return {
        "rate": rate,
        "sleep_s": sleep,
        "somaxconn": values,
        "netns": netns,
        "timeout_s": timeout,
    }


def results_option(help: str) -> Callable[[Callback], Callback]:
    """--results (or $SERVELAB_RESULTS), the results directory, said as ``help``."""
    return click.option(
        "--results",
        "results_dir",
        type=click.Path(path_type=Path),
        default=DEFAULT_RESULTS_DIR,
        show_default=True,
        envvar="SERVELAB_RESULTS",
        show_envvar=True,
        help=help,
    )


results_dir_option = results_option(
    "The results directory holding servelab.db (where RESULT ids are looked up)."
)


def complete_result(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of RESULT: the ids stored in --results (or $SERVELAB_RESULTS)."""
    from click.shell_completion import CompletionItem

    from servelab.results.database import DB_FILE, Database

    root = Path(ctx.params.get("results_dir") or os.environ.get("SERVELAB_RESULTS")
                or DEFAULT_RESULTS_DIR)
    if not (root / DB_FILE).is_file():
        return []
    try:
        rows = Database(root / DB_FILE).list_experiments()
    except Exception:  # completion must never fail the shell
        return []
    return [CompletionItem(str(row.id), help=row.name) for row in rows
            if str(row.id).startswith(incomplete)]


def complete_study(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of a study's NAME."""
    from servelab.studies import all_studies

    return [name for name in all_studies() if name.startswith(incomplete)]
min_effect_option = click.option(
    "--min-effect",
    type=float,
    default=0.0,
    show_default=True,
    help="Smallest difference, in percent, that counts as a real change.",
)


