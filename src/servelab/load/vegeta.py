"""vegeta: an access log's requests sent at their own times (``servelab.traffic``).

The sender is a small Go program, ``vegeta_replay/main.go``: one pacer that waits for
each request's time and writes it on an idle keep-alive connection, and a goroutine per
connection reading the answers (HTTP/1.1). It began as vegeta's attacker
(github.com/tsenart/vegeta, as a Go library) paced by the schedule, hence the driver's
name; its own pacing and connections take about 40 % less CPU a request
(docs/validation/replay.md, beside vegeta's own CLI). It is built by
``servelab setup --with replay`` with go into servelab's cache under a name that carries
its source's hash (a changed source is never run as an old binary). Why not the others:
oha's ``-q`` keeps one rate and cannot vary paths along a schedule; wrk2's pacing is
constant too; Locust's Python clients send a few thousand requests a second per CPU at
best, where a replay must keep 10,000.

The sender writes a line per request; the figures come from it (``replay_figures``: each
request's latency from its intended send time, the run's fidelity). Where one machine
cannot send the rate, Locust's workers on other machines can (``locust.py``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from servelab.config.load import LoadSpec, RequestSpec
from servelab.errors import MissingToolError
from servelab.host.doctor import SETUP_FIX, Check
from servelab.host.paths import cache_dir
from servelab.load.replay_figures import (
    SENT_FILE,
    read_sent,
    replay_latencies_ms,
    replay_measurements,
    sent_rate,
)
from servelab.plugins.driver import LoadDriver
from servelab.results.records import LoadMeasurement

SOURCE_DIR = Path(__file__).parent / "vegeta_replay"
SOURCE_FILES = ("main.go", "go.mod", "go.sum")  # hashed in this order
# (go.sum is empty: the sender needs nothing but Go's standard library)
# Go's net/http error texts -> kind; checked in this order.
ERROR_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("timeout", ("timeout", "deadline exceeded")),
    ("connect", ("refused", "unreachable", "no route", "no such host")),
    ("reset", ("reset", "eof", "broken pipe", "closed")),
)


def source_digest() -> str:
    """The first 12 hex digits of the sender's source's SHA-256 (main.go, go.mod, go.sum),
    as `servelab setup` names the binary it builds."""
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
                "reinstall servelab from its wheel or sdist (they carry the source), then "
                "`servelab setup --with replay`",
            )
        path = sender_path()
        if not os.access(path, os.X_OK):
            raise MissingToolError(
                f"the replay sender is not built ({path} is missing)",
                "run `servelab setup --with replay` (builds it with go, about a minute once)",
            )
        return str(path)

    def version(self) -> str:
        return f"replay-sender {source_digest()} (HTTP/1.1, Go standard library only)"

    def doctor_checks(self) -> list[Check]:
        if not all((SOURCE_DIR / name).is_file() for name in SOURCE_FILES):
            return [Check(self.name, "warn", "the replay sender's source is not in this "
                          "install: servelab cannot replay access logs",
                          "reinstall servelab from its wheel or sdist (they carry the source)")]
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
        return replay_measurements(workdir, load, ERROR_KINDS)

    def latencies_ms(self, workdir: Path) -> list[float]:
        return replay_latencies_ms(workdir)

    def sent(self, workdir: Path) -> int:
        return len(read_sent(workdir / SENT_FILE))

    def send_rate(self, workdir: Path) -> float:
        """The rate the requests actually went out at (first to last send)."""
        return sent_rate(workdir / SENT_FILE)
