"""``server-shootout``: the seed FastAPI app on every ASGI server servelab runs, and
``wsgi-shootout``: the sleepy WSGI app on the WSGI servers, uWSGI among them.

gunicorn (UvicornWorker), uvicorn, granian and hypercorn, each behind nginx on
a unix socket with the same worker count, on the four seed endpoints. uWSGI is
left out: it serves WSGI apps only and the seed app is ASGI (uWSGI's ASGI
support does not exist), so comparing it would mean comparing another app.
The report adds a "Memory per worker" section (servelab.report.memory).
"""

from __future__ import annotations

from typing import Any

from servelab.config.experiment import Experiment
from servelab.studies.base import Study, StudyOptions
from servelab.studies.seeds import (
    SEED_PROXY,
    SEED_SERVER,
    _experiment,
    seed_workloads,
)

SHOOTOUT_WORKERS = 2
# Each variant replaces the baseline's server table; knobs one server lacks are reset.
_OTHER_SERVERS = {
    "uvicorn": {"kind": "uvicorn"},
    "granian": {"kind": "granian"},
    "hypercorn": {"kind": "hypercorn"},
}


def server_shootout(options: StudyOptions) -> Experiment:
    workers = (options.workers or (SHOOTOUT_WORKERS,))[0]
    # granian accepts no backlog under 128 (the seed's is 64); every server gets 128.
    server = {**SEED_SERVER, "workers": workers, "backlog": 128}
    proxy = {**SEED_PROXY, "transport": "unix"}
    return _experiment(
        "server-shootout",
        options,
        baseline={"name": "gunicorn-uvicorn", "server": server, "proxy": proxy},
        variants=[
            {"name": name, "server": {**override, "worker_class": "uvicorn", "threads": 1}}
            for name, override in _OTHER_SERVERS.items()
        ],
        workloads=seed_workloads(options),
    )


# No sleep by default: a hello-world WSGI app, so the servers' and protocols' own
# overhead is what differs (with --sleep S every server is bound by its workers).
WSGI_SLEEP_S = 0.0
WSGI_DURATION_S = 5.0


def wsgi_shootout(options: StudyOptions) -> Experiment:
    """gunicorn sync, granian (WSGI), and uWSGI over HTTP, the uwsgi protocol and FastCGI,
    behind nginx on a unix socket, same workers, one thread each."""
    from servelab.studies.failures import sleepy_app

    workers = (options.workers or (SHOOTOUT_WORKERS,))[0]
    server = {"kind": "gunicorn", "worker_class": "sync", "workers": workers, "backlog": 128}
    load: dict[str, Any] = {"concurrency": options.concurrency or 20}
    if options.requests is None and options.duration_s is None:
        load["duration_s"] = WSGI_DURATION_S
    if options.requests is not None:
        load["requests"] = options.requests
    if options.duration_s is not None:
        load["duration_s"] = options.duration_s
    uwsgi = {"kind": "uwsgi", "worker_class": "uvicorn"}
    return _experiment(
        "wsgi-shootout",
        options,
        baseline={
            "name": "gunicorn-sync",
            "app": sleepy_app(WSGI_SLEEP_S if options.sleep_s is None else options.sleep_s),
            "server": server,
            "proxy": {**SEED_PROXY, "transport": "unix"},
        },
        variants=[
            {
                "name": "granian",
                "server": {"kind": "granian", "worker_class": "uvicorn", "blocking_threads": 1},
            },
            {"name": "uwsgi-http", "server": uwsgi},
            {"name": "uwsgi-uwsgi", "server": uwsgi, "proxy": {"protocol": "uwsgi"}},
            {"name": "uwsgi-fastcgi", "server": uwsgi, "proxy": {"protocol": "fastcgi"}},
        ],
        workloads=[{"name": "get", "request": {"method": "GET", "path": "/"}, "load": load}],
    )


SHOOTOUT_STUDIES = (
    Study(
        "server-shootout",
        "the seed FastAPI app on gunicorn (UvicornWorker), uvicorn, granian and hypercorn "
        "behind nginx on a unix socket, same workers (2; --workers N); four seed endpoints; "
        "memory per worker in the report. uWSGI is WSGI-only, so not in this ASGI shootout",
        "workers_and_threads.md, gunicorn_vs_uvicorn",
        server_shootout,
    ),
    Study(
        "wsgi-shootout",
        "the sleepy WSGI app (no sleep; --sleep S) on gunicorn sync, granian, and uWSGI "
        "spoken to over HTTP, the uwsgi protocol and FastCGI, behind nginx on a unix socket, "
        "same workers (2), one thread each; 20 clients, 5 s runs; memory per worker",
        "issue 6 (uWSGI, FastCGI)",
        wsgi_shootout,
        reads=frozenset({"sleep_s"}),
    ),
)
