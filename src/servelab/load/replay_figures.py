"""A replay's figures, from its sender's line per request (``sent.tsv``): what both replay
senders leave (servelab's Go sender, ``vegeta_replay/main.go``; Locust's workers',
written by the master from their reports, ``locustfiles/replay_user.py``).

Each line: the request's number in the schedule (the n-th is due at the schedule's n-th
time), when it was sent and its latency from that send (microseconds; seconds from the
sender's start), the status (0: no answer), bytes received, method, target, error.
Latency is counted from each request's *intended* time (its send lag plus its own
latency), as oha's ``--latency-correction`` does for a fixed rate: a stack that holds the
sender up is not let off (coordinated omission). The run's fidelity (send lag, mix,
inter-arrival KS distance; ``traffic.fidelity``) goes with its figures, so that a replay
the sender could not keep says so.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from servelab.config.load import LoadSpec
from servelab.errors import LoadDriverError
from servelab.plugins.driver import kind_of
from servelab.results.records import NamedRequests, ReplayFidelity
from servelab.traffic.fidelity import SentRequest, measure_fidelity, percentile
from servelab.traffic.routes import route_of
from servelab.traffic.schedule import read_schedule_file

SENT_FILE = "sent.tsv"
LATENCIES_FILE = "latencies.json"
ErrorKinds = tuple[tuple[str, tuple[str, ...]], ...]  # as plugins.driver.kind_of takes them


def replay_measurements(workdir: Path, load: LoadSpec, error_kinds: ErrorKinds) -> dict[str, Any]:
    """Every figure of a replay run, from ``workdir``'s sent file: latency from each
    request's intended time, status codes, connection errors by kind (the sender's own
    error texts sorted by ``error_kinds``), per route, and the fidelity. Also writes the
    latencies (``LATENCIES_FILE``) for slices and answers."""
    assert load.schedule is not None
    schedule = read_schedule_file(Path(load.schedule))
    sent = read_sent(workdir / SENT_FILE)
    speed = load.speed
    due = [d for d in schedule.due_s if load.duration_s is None or d / speed < load.duration_s]
    routes = schedule.routes if len(due) == len(schedule.due_s) else dict(
        Counter(r.route for r in sent)
    )
    latencies: list[float] = []
    by_route: dict[tuple[str, str], list[float]] = defaultdict(list)
    failures: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    status_counts: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for r in sent:
        key = (r.method, r.route)
        if r.status == 0:
            kind = kind_of(r.error, error_kinds)
            errors[kind] += 1
            failures[key][kind] += 1
            by_route.setdefault(key, [])
            continue
        status_counts[str(r.status)] += 1
        if r.status >= 400:
            failures[key][str(r.status)] += 1
        intended = due[r.seq] / speed if r.seq < len(due) else r.sent_s
        latency = (max(r.sent_s, intended) - intended + r.latency_s) * 1000
        latencies.append(latency)
        by_route[key].append(latency)
    latencies.sort()
    fidelity = measure_fidelity(due, routes, sent, speed)
    last_end = max((r.sent_s + r.latency_s for r in sent), default=0.0)
    seconds = max(last_end, min(schedule.duration_s / speed, load.duration_s or math.inf))
    with (workdir / LATENCIES_FILE).open("w") as f:
        json.dump(latencies, f)
    return {
        "requests_total": len(sent),
        "duration_s": seconds,
        "rps": len(sent) / seconds if seconds > 0 else 0.0,
        "latency_mean_ms": sum(latencies) / len(latencies) if latencies else 0.0,
        "latency_p50_ms": percentile(latencies, 50),
        "latency_p90_ms": percentile(latencies, 90),
        "latency_p99_ms": percentile(latencies, 99),
        "latency_max_ms": latencies[-1] if latencies else 0.0,
        "status_counts": dict(status_counts),
        "connection_errors": dict(errors),
        "by_name": tuple(
            _named(method, route, sorted(values), failures[(method, route)], seconds)
            for (method, route), values in sorted(by_route.items())
        ),
        "replay": ReplayFidelity.of(fidelity, speed),
    }


def replay_latencies_ms(workdir: Path) -> list[float]:
    """The last replay run's latencies (from their intended times), as measured."""
    path = workdir / LATENCIES_FILE
    return [float(x) for x in json.loads(path.read_text())] if path.is_file() else []


def _named(
    method: str, route: str, latencies: list[float], failed: Counter[str], seconds: float
) -> NamedRequests:
    count = len(latencies) + sum(n for kind, n in failed.items() if not kind.isdigit())
    return NamedRequests(
        method=method, name=route, requests=count, failures=sum(failed.values()),
        rps=count / seconds if seconds > 0 else 0.0,
        latency_mean_ms=sum(latencies) / len(latencies) if latencies else 0.0,
        latency_p50_ms=percentile(latencies, 50), latency_p99_ms=percentile(latencies, 99),
        latency_max_ms=latencies[-1] if latencies else 0.0,
        failures_by_kind=dict(failed),
    )


def read_sent(path: Path) -> list[SentRequest]:
    """The sender's line per request (see the module's doc)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise LoadDriverError(
            f"the replay sender left no record of its requests ({exc})",
            "see the sender's output (servelab doctor checks the replay senders)",
        ) from None
    out = []
    for line in text.splitlines():
        seq, sent_us, latency_us, code, _bytes, method, target, *error = line.split("\t")
        out.append(SentRequest(
            int(seq), int(sent_us) / 1e6, int(latency_us) / 1e6, int(code), method, target,
            route_of(target.partition("?")[0]), "\t".join(error),
        ))
    return out


def sent_rate(path: Path) -> float:
    """The rate the requests actually went out at (first to last send)."""
    times = [r.sent_s for r in read_sent(path)]
    if len(times) < 2 or max(times) <= min(times):
        return 0.0
    return (len(times) - 1) / (max(times) - min(times))
