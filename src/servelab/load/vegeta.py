"""vegeta: an access log's requests sent at their own times (``servelab.traffic``).

The sender is vegeta's attacker (github.com/tsenart/vegeta, as a Go library) paced by the
schedule rather than a constant rate: ``vegeta_replay/main.go``, built by
``scripts/setup.sh`` with go into servelab's cache under a name that carries its
source's hash (a changed source is never run as an old binary). Why vegeta: oha's
``-q`` keeps one rate and cannot vary paths along a schedule; wrk2's pacing is constant
too; Locust's Python clients send a few thousand requests a second per CPU at best,
where a replay must keep 5,000 (docs/validation/replay.md has the measurement).

Each request's latency is counted from its intended send time (its send lag plus its own
latency), as oha's ``--latency-correction`` does for a fixed rate: a stack that holds the
sender up is not let off (coordinated omission). The run's fidelity (send lag, mix,
inter-arrival KS distance; ``traffic.fidelity``) goes with its figures, and a replay the
sender could not keep says so.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from servelab.config.load import LoadSpec, RequestSpec
from servelab.errors import LoadDriverError, MissingToolError
from servelab.host.doctor import SETUP_FIX, Check
from servelab.host.paths import cache_dir
from servelab.load.base import LoadDriver, kind_of
from servelab.results.records import LoadMeasurement, NamedRequests, ReplayFidelity
from servelab.traffic.fidelity import SentRequest, measure_fidelity, percentile
from servelab.traffic.routes import route_of
from servelab.traffic.schedule import read_schedule_file

SOURCE_DIR = Path(__file__).parent / "vegeta_replay"
SOURCE_FILES = ("main.go", "go.mod", "go.sum")  # hashed in this order, as setup.sh does
SENT_FILE = "sent.tsv"
ERROR_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("timeout", ("timeout", "deadline exceeded")),
    ("connect", ("refused", "unreachable", "no route", "no such host")),
    ("reset", ("reset", "eof", "broken pipe", "closed")),
)


def source_digest() -> str:
    """The first 12 hex digits of the sender's source's SHA-256 (main.go, go.mod, go.sum),
    as scripts/setup.sh names the binary it builds."""
    digest = hashlib.sha256()
    for name in SOURCE_FILES:
        digest.update((SOURCE_DIR / name).read_bytes())
    return digest.hexdigest()[:12]


@functools.cache
def sender_path() -> Path:
    return cache_dir() / "go" / "bin" / f"servelab-replay-sender-{source_digest()}"


class VegetaDriver(LoadDriver):
    name = "vegeta"
    capabilities = frozenset({"request_count", "replay"})

    def executable(self) -> str:
        if not all((SOURCE_DIR / name).is_file() for name in SOURCE_FILES):
            raise MissingToolError(
                "the replay sender's source is not in this install",
                "install servelab from its checkout and run `scripts/setup.sh --with replay`",
            )
        path = sender_path()
        if not os.access(path, os.X_OK):
            raise MissingToolError(
                f"the replay sender is not built ({path} is missing)",
                "run `scripts/setup.sh --with replay` (builds it with go, about a minute once)",
            )
        return str(path)

    def version(self) -> str:
        return f"replay-sender {source_digest()} (vegeta v12.13.0)"

    def doctor_checks(self) -> list[Check]:
        if not all((SOURCE_DIR / name).is_file() for name in SOURCE_FILES):
            return [Check(self.name, "warn", "the replay sender's source is not in this "
                          "install: servelab cannot replay access logs",
                          "install servelab from its checkout (scripts/setup.sh --with replay)")]
        built = os.access(sender_path(), os.X_OK)
        return [Check(
            self.name, "ok" if built else "warn",
            f"the replay sender {sender_path()}" if built
            else "the replay sender is not built: servelab cannot replay access logs",
            "" if built else f"{SETUP_FIX} --with replay (builds it with go)",
        )]

    def unsupported(self, request: RequestSpec, load: LoadSpec) -> str | None:
        if load.model != "replay":
            return "it only replays access logs (a replay workload)"
        return None

    def command(
        self, url: str, request: RequestSpec, load: LoadSpec, body_path: Path | None, workdir: Path
    ) -> list[str]:
        assert load.schedule is not None  # LoadSpec's check for the replay model
        parts = urlsplit(url)
        argv = [
            self.executable(), "-schedule", load.schedule, "-speed", repr(float(load.speed)),
            "-base", f"{parts.scheme}://{parts.netloc}", "-out", str(workdir / SENT_FILE),
            "-connections", str(load.concurrency), "-timeout", f"{load.timeout_s:g}s",
        ]
        bodies = Path(load.schedule).with_suffix(".bodies.json")
        if bodies.is_file():
            argv += ["-bodies", str(bodies)]
        if load.duration_s is not None:  # the schedule's first seconds only (a warm-up)
            argv += ["-until", f"{load.duration_s:g}s"]
        if not load.keepalive:
            argv += ["-keepalive=false"]
        for header, value in request.headers.items():
            argv += ["-header", f"{header}: {value}"]
        return argv

    def parse(self, stdout: str, stderr: str, load: LoadSpec) -> LoadMeasurement:
        summary = json.loads(stdout.strip().splitlines()[-1])
        seconds = float(summary["seconds"])
        sent = int(summary["sent"])
        # The figures come from the per-request file (extra_measurements); these stand
        # until it is read.
        return LoadMeasurement(
            driver=self.name, requests_total=sent, duration_s=seconds,
            rps=sent / seconds if seconds > 0 else 0.0, latency_mean_ms=0.0,
            latency_p50_ms=0.0, latency_p90_ms=0.0, latency_p99_ms=0.0, latency_max_ms=0.0,
            status_counts={}, connection_errors={}, bytes_received=0,
        )

    def extra_measurements(self, workdir: Path, load: LoadSpec) -> dict[str, Any]:
        """Every figure, from the sender's line per request: latency from each request's
        intended time, status codes, connection errors by kind, per route, fidelity."""
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
                kind = kind_of(r.error, ERROR_KINDS)
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
        with (workdir / "latencies.json").open("w") as f:
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

    def latencies_ms(self, workdir: Path) -> list[float]:
        path = workdir / "latencies.json"
        return [float(x) for x in json.loads(path.read_text())] if path.is_file() else []

    def sent(self, workdir: Path) -> int:
        return len(read_sent(workdir / SENT_FILE))

    def send_rate(self, workdir: Path) -> float:
        """The rate the requests actually went out at (first to last send)."""
        times = [r.sent_s for r in read_sent(workdir / SENT_FILE)]
        if len(times) < 2 or max(times) <= min(times):
            return 0.0
        return (len(times) - 1) / (max(times) - min(times))


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
    """The sender's line per request (see vegeta_replay/main.go)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise LoadDriverError(
            f"the replay sender left no record of its requests ({exc})",
            "see the sender's output; rebuild it with scripts/setup.sh --with replay",
        ) from None
    out = []
    for line in text.splitlines():
        seq, sent_us, latency_us, code, _bytes, method, target, *error = line.split("\t")
        out.append(SentRequest(
            int(seq), int(sent_us) / 1e6, int(latency_us) / 1e6, int(code), method, target,
            route_of(target.partition("?")[0]), "\t".join(error),
        ))
    return out
