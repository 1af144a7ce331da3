"""Failure modes on demand: backlog overflow, keepalive races, worker recycling, capacity.

Each study reproduces one way nginx + gunicorn setups lose requests, and a
fix, with numbers. The failed requests are attributed to their cause from
nginx's and gunicorn's logs (``servelab.observe.attribution``), shown beside the
status counts in every report.

- ``backlog`` (seed nginx_gunicorn_somaxconn.md): nginx → gunicorn (1 sync
  worker, backlog 1024) over a unix socket, the sleepy WSGI app (2 s per
  request), 200 requests arriving in 1 s, with net.core.somaxconn 128 and
  1024 in private network namespaces; and the same overload over TCP with a
  short proxy timeout, where it shows as 504.
- ``keepalive-mismatch``: the app's keepalive timeout (1 s) shorter than
  nginx's upstream keepalive_timeout (60 s), and bursts of POSTs after idle
  gaps just past the app's timeout: nginx reuses connections the app is
  closing → 502. Fixes: the app's timeout longer than nginx's, or nginx's
  shorter than the app's (whoever closes first must be nginx).
- ``worker-recycling``: gunicorn ``max_requests`` with and without jitter
  under a steady fixed-rate load; failed and slow requests counted.
- ``capacity``: a fixed-rate ramp up to the breaking point (see servelab.measuring.ramp).
"""

from __future__ import annotations

import math
from typing import Any

from servelab.config.base import MAX_RUN_S
from servelab.config.experiment import Experiment
from servelab.config.load import SloSpec
from servelab.errors import SpecError
from servelab.host.netns import check_somaxconn
from servelab.measuring.ramp import RampPlan, ramp_experiment
from servelab.prepare.building import experiment_from_dict
from servelab.studies.base import Study, StudyOptions
from servelab.studies.seeds import SEED_ITEM_BODY, SEED_SERVER

# The seed's experiment: vegeta -rate=200 -duration=1s -timeout=500s, 2 s per request.
SEED_SLEEP_S = 2.0
SEED_RATE = 200.0
SEED_REQUESTS = 200
SEED_TIMEOUT_S = 500.0
SEED_SOMAXCONN = (128, 1024)
SEED_APP_BACKLOG = 1024  # "both nginx and gunicorn are set to queue up to 1024"


def _check_positive(value: float | None, flag: str) -> None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise SpecError(f"{flag} must be a positive number, got {value:g}", f"pass {flag} > 0")


def _common(options: StudyOptions, data: dict[str, Any], *, repetitions: int) -> Experiment:
    data.setdefault("repetitions", options.repetitions or repetitions)
    if options.driver is not None:
        data["driver"] = options.driver
    data.setdefault("warmup", {"requests": 0})
    if options.warmup_requests is not None:
        data["warmup"] = {"requests": options.warmup_requests}
    return experiment_from_dict(data, source=f"study {data['name']}")


def sleepy_app(sleep_s: float) -> dict[str, Any]:
    return {"ref": "sleepy", "env": {"SERVELAB_SLEEP_S": f"{sleep_s:g}"}}


def backlog_estimate_s(options: StudyOptions) -> float:
    """Rough wall time of the backlog study: one worker serves what the queues hold."""
    sleep = options.sleep_s or SEED_SLEEP_S
    requests = options.requests or SEED_REQUESTS
    total = 0.0
    for somaxconn in options.somaxconn or SEED_SOMAXCONN:
        served = min(requests, min(somaxconn, SEED_APP_BACKLOG) + 2)
        total += served * sleep + 5
    return total * (options.repetitions or 1)


def backlog(options: StudyOptions) -> Experiment:
    """The seed's somaxconn experiment, plus the TCP variant that shows 504s."""
    for value, flag in ((options.sleep_s, "--sleep"), (options.rate, "--rate")):
        _check_positive(value, flag)
    _check_positive(options.timeout_s, "--timeout")
    sleep = options.sleep_s or SEED_SLEEP_S
    rate = options.rate or SEED_RATE
    requests = options.requests or SEED_REQUESTS
    somaxconns = options.somaxconn or SEED_SOMAXCONN
    for value in somaxconns:
        check_somaxconn(value)
    netns = options.netns or "auto"
    # Long enough for the last queued request (one worker serves them one by one).
    drain_s = requests * sleep
    worst_s = requests / rate + drain_s
    if worst_s > MAX_RUN_S / 2:
        raise SpecError(
            f"{requests} requests at {rate:g}/s, {sleep:g} s each on one worker, may take "
            f"{worst_s:,.0f} s per run (sending, then draining the queue), more than "
            f"{MAX_RUN_S / 2:,.0f}",
            "send fewer requests (-n), at a higher --rate, or with a shorter --sleep",
        )
    timeout = options.timeout_s or max(SEED_TIMEOUT_S, 1.5 * drain_s)
    load = {
        "model": "open",
        "rate": rate,
        "requests": requests,
        "concurrency": requests,  # every request may be in flight at once, as with vegeta
        "timeout_s": timeout,
        "max_time_s": timeout + requests / rate + 30,
    }
    server = {
        "kind": "gunicorn",
        "worker_class": "sync",
        "workers": 1,
        "backlog": SEED_APP_BACKLOG,
        "timeout_s": max(30, math.ceil(4 * sleep)),
    }
    proxy_timeout = math.ceil(timeout)
    # Over TCP the proxy gives up after a few requests' worth of time: 504s.
    tcp_timeout = max(1, round(2.5 * sleep))

    def variant(name: str, somaxconn: int, transport: str, proxy_timeout_s: int) -> dict:
        return {
            "name": name,
            "app": sleepy_app(sleep),
            "server": server,
            "proxy": {"transport": transport, "timeout_s": proxy_timeout_s},
            "network": {"somaxconn": somaxconn, "namespace": netns},
        }

    stacks = [variant(f"unix-somaxconn-{s}", s, "unix", proxy_timeout) for s in somaxconns]
    stacks.append(
        variant(
            f"tcp-somaxconn-{somaxconns[0]}-timeout-{tcp_timeout}s",
            somaxconns[0],
            "tcp",
            tcp_timeout,
        )
    )
    data = {
        "name": "backlog",
        "baseline": stacks[0],
        "variants": stacks[1:],
        "workloads": [{"name": f"{requests}-in-{requests / rate:g}s", "load": load}],
    }
    return _common(options, data, repetitions=1)


# keepalive-mismatch: bursts land just after the app's keepalive timer fires on
# the connections nginx keeps; the exact moment depends on how long the burst's
# answers take, so gaps are spread over a few tens of milliseconds past it.
APP_KEEPALIVE_S = 1
NGINX_UPSTREAM_KEEPALIVE_S = 60
BURST_SIZE = 100
BURSTS_PER_GAP = 5
GAP_OFFSETS_MS = (0, 5, 10, 15, 20, 30)


def keepalive_mismatch(options: StudyOptions) -> Experiment:
    _check_positive(options.timeout_s, "--timeout")
    size = options.concurrency or BURST_SIZE
    bursts = max(1, (options.requests or size * BURSTS_PER_GAP) // size)
    request = {"method": "POST", "path": "/async/items/", "body": SEED_ITEM_BODY}
    workloads = [
        {
            "name": f"idle-{APP_KEEPALIVE_S + offset / 1000:.3f}s",
            "request": request,
            "load": {
                "model": "bursts",
                "burst_size": size,
                "burst_gap_s": APP_KEEPALIVE_S + offset / 1000,
                "requests": size * bursts,
                "concurrency": size,
                "timeout_s": options.timeout_s or 10.0,
            },
        }
        for offset in GAP_OFFSETS_MS
    ]
    # Backlog 2048, not the seeds' 64: a burst of 100 new connections (after nginx
    # dropped its idle ones) would otherwise overflow the listen queue, a different 502.
    server = {**SEED_SERVER, "workers": 1, "keepalive_s": APP_KEEPALIVE_S, "backlog": 2048}
    proxy = {
        "transport": "unix",
        "upstream_keepalive": max(128, size),
        "upstream_keepalive_timeout_s": NGINX_UPSTREAM_KEEPALIVE_S,
    }
    data = {
        "name": "keepalive-mismatch",
        "baseline": {"name": "app-1s-nginx-60s", "server": server, "proxy": proxy},
        "variants": [
            # The usual fix: the app keeps idle connections longer than nginx does.
            {"name": "fix-app-75s-nginx-60s", "server": {"keepalive_s": 75}},
            # The same rule the other way round, with the same ~1 s idle gaps.
            {
                "name": "fix-app-2s-nginx-1s",
                "server": {"keepalive_s": 2},
                "proxy": {"upstream_keepalive_timeout_s": 1},
            },
        ],
        "workloads": workloads,
    }
    return _common(options, data, repetitions=1)


RECYCLE_MAX_REQUESTS = 200
RECYCLE_JITTER = 100
RECYCLE_RATE = 200.0
RECYCLE_REQUESTS = 3000
RECYCLE_SLOW_MS = 100.0


def worker_recycling(options: StudyOptions) -> Experiment:
    _check_positive(options.rate, "--rate")
    _check_positive(options.timeout_s, "--timeout")
    rate = options.rate or RECYCLE_RATE
    requests = options.requests or RECYCLE_REQUESTS
    workers = (options.workers or (2,))[0]
    load = {
        "model": "open",
        "rate": rate,
        "requests": requests,
        "concurrency": 200,
        "timeout_s": options.timeout_s or 10.0,
        "slow_ms": RECYCLE_SLOW_MS,
    }
    request = {"method": "POST", "path": "/sync/items/", "body": SEED_ITEM_BODY}
    server = {**SEED_SERVER, "workers": workers}
    data = {
        "name": "worker-recycling",
        "baseline": {"name": "no-recycling", "server": server, "proxy": {"transport": "unix"}},
        "variants": [
            {
                "name": f"max-requests-{RECYCLE_MAX_REQUESTS}",
                "server": {"max_requests": RECYCLE_MAX_REQUESTS},
            },
            {
                "name": f"max-requests-{RECYCLE_MAX_REQUESTS}-jitter-{RECYCLE_JITTER}",
                "server": {
                    "max_requests": RECYCLE_MAX_REQUESTS,
                    "max_requests_jitter": RECYCLE_JITTER,
                },
            },
        ],
        "workloads": [{"name": f"{rate:g}-per-s", "request": request, "load": load}],
    }
    return _common(options, data, repetitions=3)


# capacity: the sleepy app (10 ms per request) on 2 sync workers can serve
# 200 requests/s; past that its listen queue (somaxconn 128) fills and 502s begin.
CAPACITY_SLEEP_S = 0.01
CAPACITY_PLAN = RampPlan(start=50, stop=500, step=50, step_s=5.0, timeout_s=10.0)
CAPACITY_SLO = SloSpec(p99_ms=500.0, max_error_ratio=0.01)


def capacity_stack(
    options: StudyOptions, *, transport: str = "unix", somaxconn: int | None = None
) -> dict[str, Any]:
    sleep = options.sleep_s or CAPACITY_SLEEP_S
    return {
        "name": f"sleepy-{sleep * 1000:g}ms-{transport}",
        "app": sleepy_app(sleep),
        "server": {
            "kind": "gunicorn",
            "worker_class": "sync",
            "workers": (options.workers or (2,))[0],
            "backlog": SEED_APP_BACKLOG,
        },
        "proxy": {"transport": transport, "timeout_s": 30},
        "network": {
            "somaxconn": somaxconn or (options.somaxconn or (128,))[0],
            "namespace": options.netns or "auto",
        },
    }


def capacity(options: StudyOptions) -> Experiment:
    _check_positive(options.sleep_s, "--sleep")
    plan = CAPACITY_PLAN
    if options.rate is not None:
        _check_positive(options.rate, "--rate")
        plan = RampPlan(
            start=options.rate / 10, stop=options.rate, step=options.rate / 10, step_s=5.0
        )
    request = {"method": "GET", "path": "/"}
    return ramp_experiment(
        "capacity",
        capacity_stack(options),
        request,
        plan,
        CAPACITY_SLO,
        repetitions=options.repetitions or 1,
    )


FAILURE_STUDIES = (
    Study(
        "backlog",
        "502s from a full unix-socket listen queue: somaxconn 128 vs 1024 in private "
        "network namespaces, 1 sync worker, 2 s per request, 200 requests in 1 s; and the "
        "504s the same overload gives over TCP. About 11 minutes at the seed's settings "
        "(one worker drains the queue at 2 s per request); --sleep 0.2 takes about 1.5 minutes",
        "nginx_gunicorn_somaxconn.md",
        backlog,
        reads=frozenset({"sleep_s", "rate", "somaxconn", "netns", "timeout_s"}),
    ),
    Study(
        "keepalive-mismatch",
        "app keepalive 1 s < nginx upstream keepalive_timeout 60 s: bursts of POSTs after "
        "idle gaps just past 1 s get 502 (keepalive race); both fixes give none; ~2 minutes",
        "keepalive.md; gunicorn/uvicorn keepalive issues",
        keepalive_mismatch,
        reads=frozenset({"timeout_s"}),
    ),
    Study(
        "worker-recycling",
        "gunicorn max_requests without and with jitter under a steady 200 requests/s: "
        "failed and slow (>100 ms) requests during worker restarts; ~3 minutes",
        "gunicorn max_requests issues",
        worker_recycling,
        reads=frozenset({"rate", "timeout_s"}),
    ),
    Study(
        "capacity",
        "fixed-rate ramp (50 to 500 requests/s) on 2 sync workers of a 10 ms app until "
        "p99 > 500 ms or errors > 1 %: highest sustainable rate and the first 502",
        "nginx_gunicorn_somaxconn.md",
        capacity,
        reads=frozenset({"sleep_s", "rate", "somaxconn", "netns"}),
    ),
)
