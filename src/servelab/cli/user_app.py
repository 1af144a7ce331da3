"""The user's app: ``--app`` and the request and database options, turned into one
``UserApp`` (``app_options``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from servelab.config.database import Database
from servelab.config.load import RequestSpec
from servelab.config.run import UserApp, UserRequest
from servelab.config.stack import AppSpec
from servelab.errors import SpecError
from servelab.prepare.user_app import request_spec

_app_options = [
    click.option(
        "--app",
        "app_ref",
        help="Your app: package.module:attr (ASGI or WSGI; a factory attr() is called).",
    ),
    click.option(
        "--app-dir",
        type=click.Path(path_type=Path),
        help="Directory holding the app's top-level package (default: cwd).",
    ),
    click.option(
        "--python",
        "app_python",
        type=click.Path(path_type=Path),
        help="The app's own interpreter (e.g. its venv's bin/python), which runs the app and "
        "its servers. Default: the nearest .venv or venv from --app-dir up to its project's "
        "root, else the current directory's, else $VIRTUAL_ENV, else servelab's.",
    ),
    click.option("--method", help="HTTP method of the request sent to --app (default GET)."),
    click.option("--path", "req_path", help="Path of the request (default /)."),
    click.option("--header", "headers", multiple=True, help="'Name: value'; repeatable."),
    click.option("--body-file", type=click.Path(path_type=Path), help="Request body file."),
    click.option(
        "--expect-status",
        type=int,
        help="Status the request must get (default 200); checked before measuring.",
    ),
    click.option(
        "--database",
        type=click.Choice(["sqlite", "postgresql"]),
        help="--app django: its database, populated with a fixed data set; postgresql is "
        "servelab's own server (default sqlite).",
    ),
    click.option(
        "--db-latency",
        type=float,
        help="--app django: add MS milliseconds to every round trip to PostgreSQL (a slow "
        "link: netem where the kernel has it, else toxiproxy); implies --database postgresql.",
    ),
    click.option(
        "--db-jitter",
        type=float,
        help="With --db-latency: each round trip's delay varies by up to ± MS.",
    ),
    click.option(
        "--startup-timeout",
        type=float,
        default=30.0,
        show_default=True,
        help="Seconds the pre-measurement check waits for the app's answer.",
    ),
]


def app_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the --app options to a command, handed to it as one ``user`` (a UserApp)."""

    @functools.wraps(func)
    def with_user_input(
        *args: Any,
        app_ref: str | None,
        app_dir: Path | None,
        app_python: Path | None,
        method: str | None,
        req_path: str | None,
        headers: tuple[str, ...],
        body_file: Path | None,
        expect_status: int | None,
        database: Database | None,
        db_latency: float | None,
        db_jitter: float | None,
        startup_timeout: float,
        **kwargs: Any,
    ) -> Any:
        for given, name in ((app_dir, "--app-dir"), (app_python, "--python")):
            if given is not None and app_ref is None:
                raise SpecError(f"{name} needs --app", "pass --app package.module:attr")
        request = UserRequest(method, req_path, tuple(headers), body_file, expect_status)
        if request.given:  # HTTP's rules for method, path and headers: before anything starts
            request_spec(RequestSpec(), request)
        user = UserApp(
            app=(
                AppSpec(ref=app_ref, app_dir=app_dir, python=app_python)
                if app_ref is not None else None
            ),
            request=request,
            database=database,
            db_latency_ms=db_latency,
            db_jitter_ms=db_jitter,
            startup_timeout_s=startup_timeout,
        )
        return func(*args, user=user, **kwargs)

    for option in reversed(_app_options):
        with_user_input = option(with_user_input)
    return with_user_input


