"""The seed articles' studies: TCP vs unix socket, upstream keepalive, workers x
threads, gunicorn vs uvicorn, and ``quick``, a three-minute taste of the first two.

The stacks follow the seeds' own configuration (KissPeter/fastapi-performance-
optimization): gunicorn with UvicornWorker, 2 workers, 1 thread, backlog 64,
keepalive 5 s, timeout 60 s; nginx as in their full config (1 worker, gzip on,
proxy buffering off, 65 s proxy timeouts). Load as in their harness: a POST of
their Item body, 100 concurrent clients.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from servelab.config.building import deep_merge
from servelab.config.experiment import Experiment
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.prepare.building import experiment_from_dict
from servelab.registry import DEFAULT_DRIVER, capabilities
from servelab.studies.base import Study, StudyOptions

SEED_ITEM_BODY = json.dumps({"name": "string", "description": "string", "price": 0, "tax": 0})

SEED_ENDPOINTS = {
    "sync-small": "/sync/items/",
    "async-small": "/async/items/",
    "sync-big": "/sync/big_json_response/",
    "async-big": "/async/big_json_response/",
}

SEED_SERVER = {
    "kind": "gunicorn",
    "worker_class": "uvicorn",
    "workers": 2,
    "threads": 1,
    "backlog": 64,
    "keepalive_s": 5,
    "timeout_s": 60,
}
SEED_PROXY = {"kind": "nginx", "transport": "tcp", "upstream_keepalive": 0}

SEED_CONCURRENCY = 100
SEED_REQUESTS = 5000


def seed_workloads(
    options: StudyOptions,
    *,
    default_endpoints: tuple[str, ...] = tuple(SEED_ENDPOINTS),
    default_requests: int | None = SEED_REQUESTS,
    default_duration_s: float | None = None,
    default_concurrency: int = SEED_CONCURRENCY,
) -> list[dict[str, Any]]:
    endpoints = options.endpoints or default_endpoints
    unknown = [e for e in endpoints if e not in SEED_ENDPOINTS]
    if unknown:
        raise SpecError(
            f"unknown endpoint {unknown[0]!r}", f"choose among {', '.join(SEED_ENDPOINTS)}"
        )
    requests, duration = options.requests, options.duration_s
    if requests is None and duration is None:
        requests, duration = default_requests, default_duration_s
    load: dict[str, Any] = {"concurrency": options.concurrency or default_concurrency}
    if requests is not None:
        load["requests"] = requests
    if duration is not None:
        load["duration_s"] = duration
    return [
        {
            "name": name,
            "request": {"method": "POST", "path": SEED_ENDPOINTS[name], "body": SEED_ITEM_BODY},
            "load": load,
        }
        for name in endpoints
    ]


def _experiment(
    name: str,
    options: StudyOptions,
    *,
    baseline: dict[str, Any],
    variants: list[dict[str, Any]] | None = None,
    grid: dict[str, list[Any]] | None = None,
    workloads: list[dict[str, Any]],
    warmup: dict[str, Any] | None = None,
    side_by_side: bool = False,
    stopping: dict[str, Any] | None = None,
) -> Experiment:
    data: dict[str, Any] = {
        "name": name,
        "baseline": baseline,
        "variants": variants or [],
        "grid": grid or {},
        "workloads": workloads,
        "warmup": dict(warmup or {}),
    }
    if _sliceable(options):
        data["side_by_side"] = side_by_side
        if stopping is not None:
            data["stopping"] = stopping
    if options.repetitions is not None:
        data["repetitions"] = options.repetitions
    if options.driver is not None:
        data["driver"] = options.driver
    if options.warmup_requests is not None:
        data["warmup"]["requests"] = options.warmup_requests
    return experiment_from_dict(data, source=f"study {name}")


def _sliceable(options: StudyOptions) -> bool:
    """Side by side needs a driver that keeps latencies and loads of at least two 1 s
    slices bounded by time; otherwise the study measures in turns."""
    return (
        "latencies" in capabilities(options.driver or DEFAULT_DRIVER)
        and options.requests is None
        and (options.duration_s is None or options.duration_s >= 2.0)
    )


def _side_by_side(
    options: StudyOptions, baseline: dict[str, Any], variants: list[dict[str, Any]]
) -> bool:
    """Whether a study whose own choice is side by side goes so: as asked, else where its
    stacks (``baseline`` and the ``variants`` merged onto it) get CPUs of their own
    (``options.fits_side_by_side``, asked once, before the build). A study that cannot be
    measured in slices is not asked (it goes in turns whatever it says)."""
    if options.side_by_side is not None:
        return options.side_by_side
    if options.fits_side_by_side is None or not _sliceable(options):
        return True
    try:
        stacks = [
            StackSpec.model_validate(stack)
            for stack in (baseline, *(deep_merge(baseline, v) for v in variants))
        ]
    except ValidationError:
        return True  # the experiment's own validation says what is wrong, as it would
    return options.fits_side_by_side(stacks)


def port_vs_socket(options: StudyOptions) -> Experiment:
    return _experiment(
        "port-vs-socket",
        options,
        baseline={"name": "nginx-tcp", "server": SEED_SERVER, "proxy": SEED_PROXY},
        variants=[{"name": "nginx-unix", "proxy": {"transport": "unix"}}],
        workloads=seed_workloads(options),
    )


def keepalive(options: StudyOptions) -> Experiment:
    proxy = {**SEED_PROXY, "transport": "unix"}
    return _experiment(
        "keepalive",
        options,
        baseline={"name": "no-keepalive", "server": SEED_SERVER, "proxy": proxy},
        variants=[{"name": "keepalive-8", "proxy": {"upstream_keepalive": 8}}],
        workloads=seed_workloads(options),
    )


def workers_threads(options: StudyOptions) -> Experiment:
    workers = list(options.workers or (1, 2, 3, 4, 5))
    threads = list(options.threads or (1, 2, 3, 4, 5))
    server = {**SEED_SERVER, "workers": workers[0], "threads": threads[0]}
    grid = {"server.workers": workers, "server.threads": threads}
    experiment = _experiment(
        "workers-threads",
        options,
        baseline={"name": "placeholder", "server": server, "proxy": SEED_PROXY},
        grid=grid,
        workloads=seed_workloads(options),
    )
    # The first grid point is the baseline; the placeholder goes.
    first, *rest = experiment.variants
    return experiment.model_copy(update={"baseline": first, "variants": tuple(rest)})


def gunicorn_vs_uvicorn(options: StudyOptions) -> Experiment:
    workers = (options.workers or (1,))[0]
    proxy = {**SEED_PROXY, "transport": "unix"}
    return _experiment(
        "gunicorn-vs-uvicorn",
        options,
        baseline={
            "name": "gunicorn",
            "server": {**SEED_SERVER, "workers": workers},
            "proxy": proxy,
        },
        variants=[
            {
                "name": "uvicorn",
                "server": {"kind": "uvicorn", "worker_class": "uvicorn", "threads": 1},
            }
        ],
        workloads=seed_workloads(options),
    )


# quick's measuring. Side by side (where each stack gets CPUs of its own: asked of its
# stacks before it is built, StudyOptions.fits_side_by_side), each round starts the three
# stacks afresh and measures them at the same moments of the machine, 2 passes of 3 s per
# endpoint. Else in turns: every round's stacks alive at once, each driven alone for 1 s
# slices in rotation, 2 passes (sharing one CPU, side by side read the cheap requests'
# differences about half their size: docs/validation/quick.md). Rounds are added until every
# requests/s comparison is within ±5 % or clear of zero, within a budget that keeps the
# whole study under 3 minutes.
QUICK_STOPPING = {"precision_pct": 5.0, "budget_s": 160.0}
QUICK_DURATION_S = 6.0  # side by side: each stack gets a third of the stack CPUs
QUICK_IN_TURNS_DURATION_S = 2.0  # in turns: each stack gets all of them


def quick(options: StudyOptions) -> Experiment:
    baseline = {"name": "nginx-tcp", "server": SEED_SERVER, "proxy": SEED_PROXY}
    variants: list[dict[str, Any]] = [
        {"name": "nginx-unix", "proxy": {"transport": "unix"}},
        {"name": "nginx-unix-keepalive", "proxy": {"transport": "unix", "upstream_keepalive": 8}},
    ]
    side_by_side = _side_by_side(options, baseline, variants)
    return _experiment(
        "quick",
        options,
        baseline=baseline,
        variants=variants,
        workloads=seed_workloads(
            options,
            default_requests=None,
            default_duration_s=QUICK_DURATION_S if side_by_side else QUICK_IN_TURNS_DURATION_S,
            default_concurrency=50,
        ),
        # One short warm-up round keeps quick within 3 minutes whatever the endpoint's
        # speed (200 requests of the ~1 MB answers took 1-4 s a round).
        warmup={"max_rounds": 1, "duration_s": 1.0 if side_by_side else 0.5},
        side_by_side=side_by_side,
        stopping=QUICK_STOPPING,
    )


SEED_STUDIES = (
    Study(
        "quick",
        "nginx->app over TCP, unix socket, unix socket + upstream keepalive; "
        "the four seed endpoints, side by side (CPUs of their own) or in turns, in slices "
        "until clear; under 3 minutes",
        "nginx_port_socket.md, keepalive.md",
        quick,
    ),
    Study(
        "port-vs-socket",
        "nginx->app over a TCP port vs a unix socket, four seed endpoints",
        "nginx_port_socket.md",
        port_vs_socket,
    ),
    Study(
        "keepalive",
        "nginx->app upstream keepalive off vs 8 idle connections (unix socket)",
        "keepalive.md",
        keepalive,
    ),
    Study(
        "workers-threads",
        "gunicorn workers x threads grid (default 1-5 x 1-5); note that "
        "UvicornWorker ignores threads",
        "workers_and_threads.md",
        workers_threads,
    ),
    Study(
        "gunicorn-vs-uvicorn",
        "gunicorn with UvicornWorker vs plain uvicorn, 1 worker each, "
        "behind nginx on a unix socket",
        "workers_and_threads.md",
        gunicorn_vs_uvicorn,
    ),
)
