"""``apache-vs-nginx``: the seed's Django app with its database on a slow link, served by
Apache (worker MPM) + mod_wsgi, nginx + FastCGI, and nginx + gunicorn.

The seed (django_apache_vs_nginx.md, 2007) put PostgreSQL on another laptop
over WiFi and ran ``ab -n 1000 -c 20`` and ``ab -n 3000 -c 500`` against
Apache (worker) + mod_wsgi, nginx + mod_wsgi and nginx + FastCGI (Django's
flup, prefork). nginx's mod_wsgi was abandoned in 2009 and flup is gone, so
servelab measures what people choose between today: Apache + mod_wsgi in
daemon mode, nginx speaking FastCGI to uWSGI, and nginx proxying HTTP to
gunicorn. Every variant gets the same pool of app processes and threads
(2 x 8; ``--workers``/``--threads``), so the front and the protocol are
what differ. The database is servelab's own PostgreSQL behind a link that
adds 10 ms ± 3 ms per round trip (``--db-latency``/``--db-jitter``): the
Django page makes its queries over it, as over the seed's WiFi.

The report adds the seed's two figures, ab's "Time per request" (mean, and
across all concurrent requests), and the memory of every process.
"""

from __future__ import annotations

from typing import Any

from servelab.config.experiment import Experiment
from servelab.errors import SpecError
from servelab.prepare.building import experiment_from_dict
from servelab.studies.base import Study, StudyOptions

# The seed's two ab runs: (name, requests, concurrency).
SEED_AB_RUNS = (("ab-c20", 1000, 20), ("ab-c500", 3000, 500))
DEFAULT_PROCESSES = 2
DEFAULT_THREADS = 8
# A WiFi hop between two laptops: a round trip of ~10 ms that wanders by a few.
DB_LATENCY_MS = 10.0
DB_JITTER_MS = 3.0
DJANGO_PAGE = "/books/"


def _refuse_load_options(options: StudyOptions) -> None:
    given = [
        flag
        for flag, value in (
            ("--concurrency", options.concurrency),
            ("--requests", options.requests),
            ("--duration", options.duration_s),
            ("--endpoints", options.endpoints),
        )
        if value is not None
    ]
    if given:
        raise SpecError(
            f"apache-vs-nginx runs the seed's two ab loads (-n 1000 -c 20, -n 3000 -c 500); "
            f"{', '.join(given)} does not apply",
            "leave it out, or write an experiment file for other loads (servelab run)",
        )


def apache_vs_nginx(options: StudyOptions) -> Experiment:
    _refuse_load_options(options)
    processes = (options.workers or (DEFAULT_PROCESSES,))[0]
    threads = (options.threads or (DEFAULT_THREADS,))[0]
    pool: dict[str, Any] = {"workers": processes, "threads": threads, "worker_class": "uvicorn"}
    data: dict[str, Any] = {
        "name": "apache-vs-nginx",
        "driver": options.driver or "ab",
        "baseline": {
            "name": "apache-mod_wsgi",
            "app": {"ref": "django"},
            "server": {**pool, "kind": "mod_wsgi"},
            "proxy": {"kind": "apache", "mpm": "worker", "transport": "tcp"},
        },
        "variants": [
            {
                "name": "nginx-fastcgi",
                "server": {**pool, "kind": "uwsgi"},
                "proxy": {
                    "kind": "nginx",
                    "mpm": None,
                    "transport": "unix",
                    "protocol": "fastcgi",
                },
            },
            {
                "name": "nginx-gunicorn",
                "server": {**pool, "kind": "gunicorn", "worker_class": "gthread"},
                "proxy": {"kind": "nginx", "mpm": None, "transport": "unix"},
            },
        ],
        "workloads": [
            {
                "name": name,
                "request": {"method": "GET", "path": DJANGO_PAGE},
                "load": {"requests": requests, "concurrency": concurrency, "timeout_s": 60},
            }
            for name, requests, concurrency in SEED_AB_RUNS
        ],
        "database": {
            "kind": "postgresql",
            "latency_ms": DB_LATENCY_MS,
            "jitter_ms": DB_JITTER_MS,
        },
    }
    if options.repetitions is not None:
        data["repetitions"] = options.repetitions
    if options.warmup_requests is not None:
        data["warmup"] = {"requests": options.warmup_requests}
    return experiment_from_dict(data, source="study apache-vs-nginx")


FRONT_STUDIES = (
    Study(
        "apache-vs-nginx",
        "the Django app with PostgreSQL behind a slow link (10 ms ± 3 ms; --db-latency, "
        "--db-jitter) on Apache (worker MPM) + mod_wsgi daemon mode, nginx + FastCGI (uWSGI) "
        "and nginx + gunicorn, 2 processes x 8 threads each; the seed's ab -n 1000 -c 20 and "
        "ab -n 3000 -c 500; time per request and memory per process side by side",
        "django_apache_vs_nginx.md",
        apache_vs_nginx,
        accepts_database=True,
    ),
)
