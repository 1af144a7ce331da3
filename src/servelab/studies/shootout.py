"""``server-shootout``: the seed FastAPI app on every ASGI server servelab runs.

gunicorn (UvicornWorker), uvicorn, granian and hypercorn, each behind nginx on
a unix socket with the same worker count, on the four seed endpoints. uWSGI is
left out: it serves WSGI apps only and the seed app is ASGI (uWSGI's ASGI
support does not exist), so comparing it would mean comparing another app.
The report adds a "Memory per worker" section (servelab.report.memory).
"""

from __future__ import annotations

from servelab.spec import Experiment
from servelab.studies import Study, StudyOptions
from servelab.studies.seeds import (
    ALL_ENDPOINTS,
    SEED_PROXY,
    SEED_REQUESTS,
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
        workloads=seed_workloads(
            options,
            default_endpoints=ALL_ENDPOINTS,
            default_requests=SEED_REQUESTS,
            default_duration_s=None,
        ),
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
)
