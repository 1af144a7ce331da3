"""Measuring the user's own app: ``--app package.module:attr`` on studies and runs.

The stack-comparing seed studies (quick, port-vs-socket, keepalive,
workers-threads, gunicorn-vs-uvicorn) keep their stacks and load but serve the
user's app and send the user's request instead of the seed endpoints. The app
is imported once up front (``servelab.apps.resolve_app``, in a subprocess), so a
missing module, a missing attribute or an app raising at import is a one-line
error before anything starts; the gunicorn worker class is then fitted to the
app (WSGI -> gthread, ASGI -> uvicorn), and said so. Finally one stack is
launched and the request sent through it (``preflight``): a wrong status stops
the experiment before any measurement.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from servelab.apps import ResolvedApp, resolve_app
from servelab.config.building import describe_validation_error
from servelab.config.database import Database, DatabaseSpec
from servelab.config.experiment import Experiment
from servelab.config.load import RequestSpec, Workload
from servelab.config.run import UserRequest
from servelab.config.stack import AppSpec, StackSpec
from servelab.errors import SpecError, StackStartError
from servelab.plugins.server import get_server

if TYPE_CHECKING:
    from servelab.plugins.server import AppServer

# Studies whose question is about the stack, not about the seed app, so they
# can be asked of any app. The failure-mode studies need the built-in sleepy app.
APP_STUDIES = (
    "quick",
    "port-vs-socket",
    "keepalive",
    "workers-threads",
    "gunicorn-vs-uvicorn",
    "server-shootout",
    "wsgi-shootout",
)
USER_WORKLOAD = "app"
# gunicorn worker class that serves an interface when the study's does not.
# The built-in Django app: the only app --database applies to, and its default page.
DJANGO_REFS = frozenset(
    {
        "django",
        "servelab.apps.django_app.wsgi:application",
        "servelab.apps.django_app.asgi:application",
    }
)
DJANGO_DEFAULT_PATH = "/books/"


def request_spec(base: RequestSpec, request: UserRequest) -> RequestSpec:
    """``base`` with the user's options applied, validated."""
    merged = {**base.model_dump(), **request.overrides()}
    try:
        return RequestSpec.model_validate(merged)
    except ValidationError as exc:
        raise SpecError(
            f"invalid request: {describe_validation_error(exc)}",
            "check --method, --path and --expect-status",
        ) from None


def check_study_accepts_app(study: str, endpoints_given: bool) -> None:
    if study not in APP_STUDIES:
        raise SpecError(
            f"study {study!r} measures a built-in app and cannot serve --app",
            f"use --app with one of: {', '.join(APP_STUDIES)}",
        )
    if endpoints_given:
        raise SpecError(
            "--endpoints names the seed app's endpoints and does not apply with --app",
            "give the request with --method, --path, --header and --body-file",
        )


def fit_stack(stack: StackSpec, app_spec: AppSpec, app: ResolvedApp) -> tuple[StackSpec, str]:
    """``stack`` serving ``app_spec``, its server's settings fitted to the app (e.g.
    gunicorn's worker class). Returns the stack and a note ('' when nothing changed)."""
    server: AppServer = get_server(stack.server.kind)
    if app.interface not in server.interfaces:
        raise SpecError(
            f"variant {stack.name} runs {server.kind}, which serves "
            f"{' and '.join(i.upper() for i in sorted(server.interfaces))} apps only, and "
            f"{app.import_path} is {app.interface.upper()}",
            f"give another app, or choose a study without {server.kind} (e.g. server-shootout)",
        )
    fitted, change = server.fit_to_app(stack.server, app)
    note = f"{stack.name}: app is {app.interface.upper()}, so {change}" if change else ""
    return stack.model_copy(update={"app": app_spec, "server": fitted}), note


def with_user_app(
    experiment: Experiment,
    app_spec: AppSpec | None,
    request: UserRequest,
    *,
    replace_workloads: bool,
) -> tuple[Experiment, list[str]]:
    """``experiment`` serving the user's app and sending the user's request.

    ``replace_workloads`` (studies): the seed endpoints become one workload
    named ``app`` with the first workload's load. Otherwise (experiment files)
    every workload keeps its own request, with the given options applied.
    Raises SpecError, with the app's own message, if the app cannot be used.
    """
    notes: list[str] = []
    update: dict[str, Any] = {}
    if app_spec is not None:
        app = resolve_user_app(app_spec)
        notes.append(
            f"app {app.import_path}: {app.interface.upper()}{' factory' if app.is_factory else ''}"
        )
        stacks = []
        for stack in experiment.stacks:
            fitted, note = fit_stack(stack, app_spec, app)
            stacks.append(fitted)
            if note:
                notes.append(note)
        update["baseline"], update["variants"] = stacks[0], tuple(stacks[1:])
    if replace_workloads:
        first = experiment.workloads[0]
        default = RequestSpec()
        if app_spec is not None and app_spec.ref in DJANGO_REFS:
            default = RequestSpec(path=DJANGO_DEFAULT_PATH)
        req = request_spec(default, request)
        update["workloads"] = (Workload(name=USER_WORKLOAD, request=req, load=first.load),)
    elif request.given:
        update["workloads"] = tuple(
            w.model_copy(update={"request": request_spec(w.request, request)})
            for w in experiment.workloads
        )
    if not update:
        return experiment, notes
    # Re-validated, so the fitted stacks pass the same checks as a file's.
    data = experiment.model_dump()
    data.update({k: _dump(v) for k, v in update.items()})
    return Experiment.model_validate(data), notes


def resolve_user_app(app_spec: AppSpec) -> ResolvedApp:
    """resolve_app, with the traceback cut to the app's own line that raised."""
    try:
        return resolve_app(app_spec)
    except SpecError as exc:
        frames = [
            line.strip()
            for line in exc.detail.splitlines()
            if line.strip().startswith('File "')
            and not line.strip().startswith(('File "<',))
            and "/importlib/" not in line
        ]
        raise SpecError(exc.problem, exc.fix, detail=frames[-1] if frames else "") from None


def _dump(value: Any) -> Any:
    if isinstance(value, tuple):
        return [v.model_dump() for v in value]
    return value.model_dump()


def preflight(experiment: Experiment, *, timeout_s: float = 30.0) -> None:
    """Launch the baseline stack and send each workload's request (each path of a
    mix) through it, one launch per distinct request.

    Raises StackStartError saying what the app answered (its status, or the
    server's log) when a request does not get its expected status.
    """
    from servelab.launch import launch_stack

    seen: set[tuple[str, str]] = set()
    requests = [
        request
        for w in experiment.workloads
        for request in (
            [w.request.model_copy(update={"path": m.path, "mix": ()}) for m in w.request.mix]
            if w.request.mix
            else [w.request]
        )
    ]
    for req in requests:
        if (req.method, req.path) in seen:
            continue
        seen.add((req.method, req.path))
        try:
            with launch_stack(experiment.baseline, probe=req, startup_timeout_s=timeout_s):
                pass
        except StackStartError as exc:
            wrong = answered_status(exc)
            said = _answer_body(experiment, req, wrong, timeout_s) if wrong else ""
            raise StackStartError(
                f"before measuring, {req.method} {req.path} to the app: {exc.problem}"
                + (f"; the app said: {said}" if said else ""),
                exc.fix,
                detail=exc.detail,
            ) from None


def answered_status(exc: StackStartError) -> int | None:
    """The status a stack answered its probe with, when that was the failure (None: it
    failed otherwise, e.g. did not start)."""
    found = re.search(r"with HTTP (\d{3}), expected", exc.problem)
    return int(found[1]) if found else None


def _answer_body(experiment: Experiment, req: RequestSpec, status: int, timeout_s: float) -> str:
    """The start of what the app answers ``req`` with ``status`` (one line), or ''."""
    import urllib.error
    import urllib.request

    from servelab.launch import launch_stack

    probe = req.model_copy(update={"expect_status": status})
    headers = dict(req.headers)
    if req.body is not None:
        headers["Content-Type"] = req.content_type
    try:
        with launch_stack(experiment.baseline, probe=probe, startup_timeout_s=timeout_s) as stack:
            request = urllib.request.Request(
                stack.url(req.path),
                method=req.method,
                data=req.body.encode() if req.body is not None else None,
                headers=headers,
            )
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            try:
                body = opener.open(request, timeout=timeout_s).read(300)
            except urllib.error.HTTPError as answer:
                body = answer.read(300)
    except (OSError, ValueError, StackStartError):
        return ""
    return " ".join(body.decode(errors="replace").split())[:200]


def with_app_env(experiment: Experiment, env: dict[str, str]) -> Experiment:
    """``experiment`` with ``env`` added to the environment of the Django app's stacks."""
    stacks = [
        s.model_copy(update={"app": s.app.model_copy(update={"env": {**s.app.env, **env}})})
        if s.app.ref in DJANGO_REFS
        else s
        for s in experiment.stacks
    ]
    return experiment.with_stacks(stacks)


def database_spec(
    current: DatabaseSpec | None,
    kind: Database | None,
    latency_ms: float | None,
    jitter_ms: float | None,
) -> DatabaseSpec | None:
    """``current`` (an experiment's [database]) with --database, --db-latency and
    --db-jitter applied; the delay options imply PostgreSQL. One-line SpecError if
    they do not go together."""
    if kind is None and latency_ms is None and jitter_ms is None:
        return current
    given = (("--db-latency", latency_ms), ("--db-jitter", jitter_ms))
    delay = [flag for flag, value in given if value is not None]
    if delay and kind == "sqlite":
        raise SpecError(
            f"{' and '.join(delay)} slow{'s' if len(delay) == 1 else ''} the link to "
            "PostgreSQL, and --database sqlite has none (SQLite is a file the app opens itself)",
            "drop --database sqlite: --db-latency implies --database postgresql",
        )
    data: dict[str, Any] = current.model_dump() if current is not None else {}
    if kind is not None:
        data["kind"] = kind
    if kind == "sqlite":  # the file's delays go with the file's PostgreSQL
        data.pop("latency_ms", None)
        data.pop("jitter_ms", None)
    if delay:
        data["kind"] = "postgresql"
    for key, value in (("latency_ms", latency_ms), ("jitter_ms", jitter_ms)):
        if value is not None:
            data[key] = value
    data.setdefault("kind", "sqlite")
    try:
        return DatabaseSpec.model_validate(data)
    except ValidationError as exc:
        where = describe_validation_error(exc).removeprefix("value: ")
        raise SpecError(
            f"invalid database link: {where}",
            "give --db-latency and --db-jitter in ms, 0 to 10000, jitter at most the latency",
        ) from None


def describe_database(version: str, link: Any = None) -> str:
    """'PostgreSQL 15 behind toxiproxy 2.12.0, +20 ms ± 5 ms latency per round trip'."""
    if link is None:
        return f"PostgreSQL {version} on loopback, no added latency"
    return f"PostgreSQL {version} behind {link.describe()}"


@contextmanager
def app_database(
    experiment: Experiment,
    database: DatabaseSpec,
    say: Callable[[str], None],
    *,
    cpus: str | None = None,
) -> Iterator[tuple[Experiment, str]]:
    """A populated database for the Django reference app, for the whole experiment: the
    experiment pointed at it, and what was used (the environment's "database" fact).

    ``postgresql`` starts servelab's own cluster (servelab.services.postgres), behind a
    slowed link (servelab.services.slowlink) when ``database`` asks for latency; ``sqlite``
    a file in a temp dir. Both are removed when the block ends, and registered
    with the janitor (which must be running) in case servelab is killed. What
    was used is said. ``cpus``
    pins PostgreSQL and its link: off the stack's CPUs, as the seed's database
    was on another machine.
    """
    from servelab.apps.django_app.populate import populate_database, sqlite_env
    from servelab.host.procs import JANITOR

    if not any(s.app.ref in DJANGO_REFS for s in experiment.stacks):
        raise SpecError(
            "--database applies to the built-in Django app only",
            "pass --app django (or leave out --database and the file's database table)",
        )
    experiment = experiment.model_copy(update={"database": database})
    if database.kind == "postgresql":
        with _postgresql(database, say, cpus) as (env, described):
            yield with_app_env(experiment, env), described
        return
    workdir = Path(tempfile.mkdtemp(prefix="servelab-sqlite-"))
    JANITOR.watch("path", workdir)
    try:
        env = sqlite_env(workdir / "bookshop.sqlite3")
        say(f"SQLite database {env['SERVELAB_DJANGO_SQLITE']}, populating it")
        populate_database(env)
        yield with_app_env(experiment, env), "SQLite file"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        JANITOR.forget("path", workdir)


@contextmanager
def _postgresql(
    database: DatabaseSpec, say: Callable[[str], None], cpus: str | None
) -> Iterator[tuple[dict[str, str], str]]:
    """(the app's env, a description) of servelab's PostgreSQL, populated, slowed if asked.

    Seeding goes direct (TCP on loopback, or the unix socket when PostgreSQL is
    in a netem namespace), so the delay costs only the measured requests.
    """
    from contextlib import ExitStack

    from servelab.apps.django_app.populate import populate_database
    from servelab.services.postgres import run_postgres
    from servelab.services.slowlink import choose_method, netem_link, slow_link

    if not database.slowed:
        with run_postgres(cpus=cpus) as pg:
            say(f"PostgreSQL {pg.version} on 127.0.0.1:{pg.port} ({pg.workdir}), populating it")
            populate_database(pg.django_env())
            yield pg.django_env(), describe_database(pg.version) + _on_cpus(cpus)
        return
    method = choose_method(database.link)
    latency, jitter = database.latency_ms, database.jitter_ms
    with ExitStack() as stack:
        netem = stack.enter_context(netem_link(latency, jitter)) if method == "netem" else None
        if netem is None:
            pg = stack.enter_context(run_postgres(cpus=cpus))
            direct = pg.django_env()
        else:
            pg = stack.enter_context(
                run_postgres(namespace=netem.namespace, listen_host=netem.ns_ip, cpus=cpus)
            )
            direct = pg.django_env(host=str(pg.socket_dir))
        link = stack.enter_context(
            slow_link(pg.host, pg.port, latency, jitter, method, cpus=cpus)
        )
        described = describe_database(pg.version, link) + _on_cpus(cpus)
        rounded = (link.latency_ms, link.jitter_ms) != (latency, jitter)
        say(
            f"{described} (app connects to {link.host}:{link.port}; PostgreSQL on "
            f"{pg.host}:{pg.port}, {pg.workdir})"
            + (f"; asked for +{latency:g} ms ± {jitter:g} ms, {method} applies whole ms"
               if rounded else "")
            + ", populating it"
        )
        populate_database(direct)
        yield pg.django_env(host=link.host, port=link.port), described


def _on_cpus(cpus: str | None) -> str:
    return f", on CPU {cpus} (off the stack's CPUs)" if cpus else ""
