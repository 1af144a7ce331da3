"""What to measure: stacks, workloads and experiments, validated.

Models are frozen pydantic models with ``extra="forbid"`` so that a typo in a
TOML file ("wokers = 2") is an error that names the key, not a silent default.
"""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from servelab.errors import SpecError

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
# One open-model run may not plan more requests than this (rate x duration),
# and no run may be given more than an hour.
MAX_REQUESTS_PER_RUN = 10_000_000
MAX_RUN_S = 3600.0


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AppSpec(Model):
    """The app served: a built-in name or an import path ``package.module:attr``."""

    ref: str = "fastapi"
    app_dir: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)


class ServerSpec(Model):
    """The app server and its knobs. Defaults follow the seeds' gunicorn config.

    ``mod_wsgi``: Apache runs the (WSGI) app itself, in mod_wsgi daemon mode
    (``workers`` daemon processes of ``threads`` threads; ``backlog`` is the
    daemons' listen-backlog, ``timeout_s`` their request-timeout); it needs
    proxy kind ``apache``.
    """

    kind: Literal["gunicorn", "uvicorn", "granian", "hypercorn", "uwsgi", "mod_wsgi"] = "gunicorn"
    worker_class: Literal["uvicorn", "sync", "gthread"] = "uvicorn"
    workers: PositiveInt = 2
    # gunicorn and uWSGI: threads per worker; granian: runtime threads per worker.
    threads: PositiveInt = 1
    # granian only: the threads that run a WSGI app's (or ASGI sync) code, per worker.
    blocking_threads: PositiveInt | None = None
    backlog: PositiveInt = 2048
    keepalive_s: PositiveInt = 5
    timeout_s: PositiveInt = 60
    # Restart a worker after this many requests (0 = never), plus randint(0, jitter).
    max_requests: NonNegativeInt = 0
    max_requests_jitter: NonNegativeInt = 0

    @model_validator(mode="after")
    def _check(self) -> ServerSpec:
        if self.kind in ("uvicorn", "hypercorn") and self.threads != 1:
            raise ValueError(f"{self.kind} has no threads setting; use kind='gunicorn' for threads")
        if self.blocking_threads is not None and self.kind != "granian":
            raise ValueError(f"blocking_threads is a granian knob; {self.kind} has none")
        if self.kind not in ("gunicorn", "uvicorn") and self.worker_class != "uvicorn":
            raise ValueError(f"worker_class is a gunicorn knob; {self.kind} has none")
        if self.kind == "granian" and self.backlog < 128:
            raise ValueError(f"granian needs backlog >= 128 (got {self.backlog})")
        if self.kind == "granian" and self.max_requests:
            raise ValueError("granian has no max_requests (it restarts workers by time or RSS)")
        if self.kind in ("uwsgi", "mod_wsgi") and self.max_requests_jitter:
            raise ValueError(f"{self.kind} has no max_requests_jitter; use max_requests alone")
        if self.max_requests_jitter and not self.max_requests:
            raise ValueError("max_requests_jitter needs max_requests > 0 (jitter adds to it)")
        return self


# ProxySpec knobs that only nginx has, and the Apache ones (None: Apache's default).
NGINX_ONLY_KNOBS = ("worker_processes", "worker_connections", "gzip_min_length", "buffering")
APACHE_KNOBS = ("mpm", "max_request_workers", "threads_per_child", "start_servers")
# Apache's ThreadsPerChild when unset (worker and event MPMs).
APACHE_THREADS_PER_CHILD = 25


class ProxySpec(Model):
    """The reverse proxy in front of the app server (``none``, nginx or Apache httpd).

    Apache maps the shared knobs onto its own directives (``timeout_s``:
    Timeout and the ProxyPass timeouts, ``client_keepalive_*``: KeepAliveTimeout
    and MaxKeepAliveRequests, ``gzip``: mod_deflate, ``upstream_keepalive``:
    mod_proxy's per-child connection pool); the nginx-only ones
    (NGINX_ONLY_KNOBS) must stay at their defaults, and the Apache ones
    (APACHE_KNOBS) unset with nginx.
    """

    kind: Literal["none", "nginx", "apache"] = "nginx"
    transport: Literal["tcp", "unix"] = "tcp"
    # How nginx talks to the app server: HTTP (proxy_pass), or, to uWSGI only,
    # the uwsgi protocol (uwsgi_pass) or FastCGI (fastcgi_pass).
    protocol: Literal["http", "uwsgi", "fastcgi"] = "http"
    upstream_keepalive: NonNegativeInt = 0
    # nginx closes idle upstream connections after this (its own default: 60 s).
    upstream_keepalive_timeout_s: PositiveInt = 60
    worker_processes: PositiveInt = 1
    worker_connections: PositiveInt = 4096
    client_keepalive_timeout_s: NonNegativeInt = 120
    client_keepalive_requests: PositiveInt = 5000
    gzip: bool = True
    gzip_comp_level: Annotated[int, Field(ge=1, le=9)] = 6
    gzip_min_length: NonNegativeInt = 200
    buffering: bool = False
    timeout_s: PositiveInt = 65
    # Apache only; None = Apache's own default. mpm None runs the event MPM.
    mpm: Literal["prefork", "worker", "event"] | None = None
    max_request_workers: PositiveInt | None = None
    threads_per_child: PositiveInt | None = None  # worker and event MPMs only
    start_servers: PositiveInt | None = None

    @model_validator(mode="after")
    def _check(self) -> ProxySpec:
        if self.kind == "none" and self.transport == "unix":
            raise ValueError(
                "transport 'unix' needs a proxy in front (load drivers speak TCP); "
                "use proxy kind 'nginx' or 'apache', or transport 'tcp'"
            )
        if self.protocol != "http" and self.kind == "none":
            raise ValueError(
                f"protocol {self.protocol!r} needs nginx in front (proxy kind 'nginx'; "
                "Apache speaks it too: 'apache')"
            )
        self._check_apache_knobs()
        if self.protocol != "http" and self.upstream_keepalive:
            raise ValueError(
                f"upstream_keepalive is measured over HTTP only; set it to 0 with protocol "
                f"{self.protocol!r}"
            )
        return self

    def _check_apache_knobs(self) -> None:
        if self.kind != "apache":
            given = [k for k in APACHE_KNOBS if getattr(self, k) is not None]
            if given:
                raise ValueError(
                    f"{', '.join(given)}: Apache knob{'s' if len(given) > 1 else ''}; "
                    f"set proxy kind 'apache' or remove {'them' if len(given) > 1 else 'it'}"
                )
            return
        for knob in NGINX_ONLY_KNOBS:
            if getattr(self, knob) != type(self).model_fields[knob].default:
                raise ValueError(
                    f"{knob} is an nginx knob; Apache has none (its knobs: mpm, "
                    "max_request_workers, threads_per_child, start_servers)"
                )
        if self.mpm == "prefork":
            if self.threads_per_child is not None:
                raise ValueError(
                    "threads_per_child needs a threaded MPM (prefork runs one thread per "
                    "process); use mpm 'worker' or 'event', or remove it"
                )
            return
        threads = self.threads_per_child or APACHE_THREADS_PER_CHILD
        workers = self.max_request_workers
        if workers is not None and workers % threads:
            nearest = max(threads, workers // threads * threads)
            raise ValueError(
                f"max_request_workers {workers} must be a multiple of threads_per_child "
                f"{threads} (Apache would round it down); e.g. {nearest}"
            )

    @property
    def apache_mpm(self) -> str:
        """The MPM Apache runs (event unless ``mpm`` says otherwise)."""
        return self.mpm or "event"


class NetworkSpec(Model):
    """Where the stack and its load driver run, and the kernel's listen-queue cap there.

    With ``somaxconn`` set, servelab runs both in a private network namespace with
    net.core.somaxconn at that value, leaving the host untouched. ``namespace``:
    "auto" falls back, when namespaces are unavailable (not root), to capping the
    app server's backlog at ``somaxconn`` and says so; "require" fails instead;
    "off" never creates one (the fallback is used).
    """

    somaxconn: Annotated[int, Field(ge=1, le=65535)] | None = None
    namespace: Literal["auto", "require", "off"] = "auto"


class StackSpec(Model):
    """One configuration to measure: app + server + proxy."""

    name: str = "baseline"
    app: AppSpec = Field(default_factory=AppSpec)
    server: ServerSpec = Field(default_factory=ServerSpec)
    proxy: ProxySpec = Field(default_factory=ProxySpec)
    network: NetworkSpec = Field(default_factory=NetworkSpec)

    @model_validator(mode="after")
    def _check_protocol(self) -> StackSpec:
        if self.server.kind == "mod_wsgi":
            if self.proxy.kind != "apache":
                raise ValueError(
                    "server kind 'mod_wsgi' runs the app inside Apache; set proxy kind 'apache'"
                )
            if self.proxy.upstream_keepalive:
                raise ValueError(
                    "upstream_keepalive does not apply to mod_wsgi (Apache reaches its daemon "
                    "processes over mod_wsgi's own unix socket, per request); set it to 0"
                )
        if self.proxy.protocol != "http" and self.server.kind != "uwsgi":
            raise ValueError(
                f"proxy protocol {self.proxy.protocol!r} is spoken by uwsgi only, not "
                f"{self.server.kind}; use protocol 'http'"
            )
        return self

    def describe(self) -> str:
        s, p = self.server, self.proxy
        if s.kind == "gunicorn":
            server = f"gunicorn[{s.worker_class}] workers={s.workers} threads={s.threads}"
        elif s.kind in ("uwsgi", "granian"):
            server = f"{s.kind} workers={s.workers} threads={s.threads}"
            if s.blocking_threads:
                server += f" blocking_threads={s.blocking_threads}"
        elif s.kind == "mod_wsgi":
            server = f"mod_wsgi daemon processes={s.workers} threads={s.threads}"
        else:
            server = f"{s.kind} workers={s.workers}"
        if s.max_requests:
            jitter = f"+0..{s.max_requests_jitter}" if s.max_requests_jitter else ""
            server += f" max_requests={s.max_requests}{jitter}"
        extra = f", somaxconn {self.network.somaxconn}" if self.network.somaxconn else ""
        if p.kind == "none":
            return f"{server}, no proxy{extra}"
        front = "nginx"
        if p.kind == "apache":
            knobs = [f"{k}={getattr(p, k)}" for k in APACHE_KNOBS[1:] if getattr(p, k) is not None]
            front = f"apache[{' '.join([p.apache_mpm, *knobs])}]"
            if s.kind == "mod_wsgi":
                return f"{front} + {server}{extra}"
        keepalive = (
            f"upstream keepalive {p.upstream_keepalive}"
            if p.upstream_keepalive
            else ("no upstream keepalive")
        )
        via = p.transport if p.protocol == "http" else f"{p.transport}/{p.protocol}"
        return f"{front} --{via}--> {server}, {keepalive}{extra}"


class WeightedPath(Model):
    """One path of a request mix, sent ``weight`` times as often as a weight-1 path."""

    path: str
    weight: Annotated[int, Field(ge=1, le=1000)] = 1


class RequestSpec(Model):
    """The request every virtual user sends.

    With ``mix``, each request goes to one of its paths, drawn at random by
    weight (same method, headers and body); ``path`` then defaults to the first.
    """

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "GET"
    path: str = "/"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str | None = None
    content_type: str = "application/json"
    expect_status: Annotated[int, Field(ge=100, le=599)] = 200
    mix: tuple[WeightedPath, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _path_from_mix(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("mix") and "path" not in data:
            first = data["mix"][0]
            path = first.get("path") if isinstance(first, dict) else getattr(first, "path", None)
            if isinstance(path, str):
                data = {**data, "path": path}
        return data

    @model_validator(mode="after")
    def _check(self) -> RequestSpec:
        for path in (self.path, *(m.path for m in self.mix)):
            if not path.startswith("/"):
                raise ValueError(f"path {path!r} must start with '/'")
        return self


class LoadSpec(Model):
    """How hard and how long: closed model (concurrency) or open model (fixed rate).

    Every run is bounded: a request count, a duration, or both; the driver is
    also killed after ``max_time_s``. The ``bursts`` model sends ``burst_size``
    requests at once, then waits ``burst_gap_s``, and again (idle-then-reuse).
    """

    model: Literal["closed", "open", "bursts"] = "closed"
    concurrency: PositiveInt = 100
    requests: PositiveInt | None = None
    duration_s: PositiveFloat | None = None
    rate: PositiveFloat | None = None
    burst_size: PositiveInt | None = None
    burst_gap_s: PositiveFloat | None = None
    keepalive: bool = True
    timeout_s: PositiveFloat = 30.0
    max_time_s: Annotated[float, Field(gt=0, le=MAX_RUN_S)] = 600.0
    # Count the requests slower than this (latency from the intended send time).
    slow_ms: PositiveFloat | None = None

    @model_validator(mode="after")
    def _check(self) -> LoadSpec:
        if self.requests is None and self.duration_s is None:
            raise ValueError("a load needs 'requests' or 'duration_s' so the run is bounded")
        if self.model == "open" and self.rate is None:
            raise ValueError("the open model needs 'rate' (requests per second)")
        if self.model == "closed" and self.rate is not None:
            raise ValueError("'rate' belongs to the open model; set model = 'open'")
        if self.duration_s is not None and self.duration_s > self.max_time_s:
            raise ValueError(f"duration_s {self.duration_s} exceeds max_time_s {self.max_time_s}")
        if self.model == "open" and self.rate is not None:
            self._check_open_bounds(self.rate)
        if self.model == "bursts":
            self._check_bursts()
        elif self.burst_size is not None or self.burst_gap_s is not None:
            raise ValueError("burst_size and burst_gap_s belong to model = 'bursts'")
        return self

    def _check_bursts(self) -> None:
        if self.burst_size is None or self.burst_gap_s is None:
            raise ValueError("the bursts model needs burst_size and burst_gap_s")
        if self.requests is None or self.duration_s is not None:
            raise ValueError("the bursts model is bounded by 'requests' (burst_size x bursts)")
        sending_s = -(-self.requests // self.burst_size) * self.burst_gap_s
        if sending_s > self.max_time_s:
            raise ValueError(
                f"{self.requests} requests in bursts of {self.burst_size} every "
                f"{self.burst_gap_s:g} s take {sending_s:,.0f} s, more than max_time_s "
                f"{self.max_time_s:g}; send fewer requests or bigger bursts"
            )

    def _check_open_bounds(self, rate: float) -> None:
        """An open-model run must end: its request count and sending time are capped."""
        if self.duration_s is not None:
            planned = rate * self.duration_s
            if planned > MAX_REQUESTS_PER_RUN:
                raise ValueError(
                    f"rate {rate:g}/s x duration_s {self.duration_s:g} = {planned:,.0f} requests "
                    f"in one run, more than {MAX_REQUESTS_PER_RUN:,}; lower the rate or duration"
                )
        elif self.requests is not None:
            if self.requests > MAX_REQUESTS_PER_RUN:
                raise ValueError(
                    f"{self.requests:,} requests in one open-model run, more than "
                    f"{MAX_REQUESTS_PER_RUN:,}; send fewer"
                )
            sending_s = self.requests / rate
            if sending_s > self.max_time_s:
                raise ValueError(
                    f"{self.requests} requests at {rate:g}/s take {sending_s:,.0f} s to send, "
                    f"more than max_time_s {self.max_time_s:g}; raise the rate or send fewer"
                )


class Workload(Model):
    name: str
    request: RequestSpec = Field(default_factory=RequestSpec)
    load: LoadSpec = Field(default_factory=lambda: LoadSpec(requests=1000))


class WarmupSpec(Model):
    """Load sent to every fresh stack before measuring; its result is discarded.

    Rounds of ``requests`` are sent until the requests/s of the last two rounds
    differ by less than ``settle_pct`` percent, or ``max_rounds`` were sent.
    """

    requests: NonNegativeInt = 200
    concurrency: PositiveInt = 10
    max_rounds: PositiveInt = 5
    settle_pct: PositiveFloat = 5.0
    # Set: each round lasts this long at the workload's own concurrency instead (bounded
    # in time whatever the endpoint's speed; quick uses it). requests = 0 still disables.
    duration_s: PositiveFloat | None = None


class SloSpec(Model):
    """A load step breaks the SLO when p99 latency or the error ratio goes above these.

    A ramp stops at the first step that breaks it, or, when no 502 was seen yet,
    after up to ``extra_steps`` more steps spent looking for the first 502.
    """

    p99_ms: PositiveFloat = 1000.0
    max_error_ratio: Annotated[float, Field(ge=0, lt=1)] = 0.01
    extra_steps: Annotated[int, Field(ge=0, le=10)] = 2


# The most delay a slowed database link may add (--db-latency, --db-jitter).
MAX_DB_DELAY_MS = 10_000.0
DbDelay = Annotated[float, Field(ge=0, le=MAX_DB_DELAY_MS)]


class DatabaseSpec(Model):
    """The Django reference app's database and, for PostgreSQL, a slowed link to it.

    ``latency_ms`` is added to every round trip between the app and PostgreSQL
    (half on the way there, half on the way back, as on a real network), each
    delay drawn from latency ± ``jitter_ms``. ``link`` chooses how: ``netem``
    (a kernel qdisc on a veth pair to a namespace holding PostgreSQL), or
    ``toxiproxy`` (a TCP proxy); ``auto`` takes netem where the kernel has it.
    """

    kind: Literal["sqlite", "postgresql"]
    latency_ms: DbDelay = 0.0
    jitter_ms: DbDelay = 0.0
    link: Literal["auto", "netem", "toxiproxy"] = "auto"

    @model_validator(mode="after")
    def _check(self) -> DatabaseSpec:
        if (self.latency_ms or self.jitter_ms) and self.kind != "postgresql":
            raise ValueError(
                "latency_ms and jitter_ms need kind = 'postgresql' (SQLite is a file the app "
                "opens itself: there is no link to slow down)"
            )
        if self.jitter_ms > self.latency_ms:
            raise ValueError(
                f"jitter_ms {self.jitter_ms:g} exceeds latency_ms {self.latency_ms:g}; each "
                "delay is latency ± jitter and cannot go below 0, so keep jitter <= latency"
            )
        return self

    @property
    def slowed(self) -> bool:
        return self.latency_ms > 0


# A slice shorter than this would be mostly the driver's connection set-up.
MIN_SLICE_S = 1.0


def slicing_problem(load: LoadSpec, slices: int) -> str | None:
    """Why ``load`` cannot be cut into ``slices`` (None when it can)."""
    if slices == 1:
        return None
    if load.model != "closed":
        return f"a {load.model}-model load keeps its own schedule; slices cut it"
    if load.duration_s is not None and load.duration_s / slices < MIN_SLICE_S:
        return (
            f"{load.duration_s:g} s in {slices} slices is under {MIN_SLICE_S:g} s each "
            "(mostly the driver's connection set-up)"
        )
    if load.requests is not None and load.requests < slices * load.concurrency:
        return f"{load.requests} requests in {slices} slices leave under one per connection"
    return None


# Slice length servelab aims for when it chooses the slices itself (see the README's
# "Measuring in slices"): long enough that the driver's connection set-up is a small
# part of it, short enough that several passes fit in a quick study.
SLICE_TARGET_S = 1.0
# Side by side, longer slices: the stacks see the same moments of the machine whatever
# the length, and a longer slice averages the stacks' own fast noise.
SIDE_BY_SIDE_SLICE_S = 3.0
MAX_AUTO_SLICES = 10


def auto_slices(load: LoadSpec, target_s: float = SLICE_TARGET_S) -> int:
    """The slices a load is cut into by default: about ``target_s`` each (or at least 20
    requests per connection for a request count), 1 where slicing does not apply."""
    if load.model != "closed":
        return 1
    if load.duration_s is not None:
        wanted = int(load.duration_s // target_s)
    else:
        assert load.requests is not None
        wanted = load.requests // (20 * load.concurrency)
    return max(1, min(MAX_AUTO_SLICES, wanted))


class StoppingSpec(Model):
    """Measure until every comparison is clear, or the budget is spent (sliced runs only).

    A comparison is clear when its 95 % interval is at most ``precision_pct`` wide on
    either side, or lies entirely beyond ±``min_effect_pct``. While one is not, servelab
    adds rounds of fresh starts of every variant (and more passes per start when the
    slices, not the starts, are the noisier part), as long as the next round fits in
    ``budget_s`` of measuring time, up to ``max_repetitions`` starts per variant.
    """

    precision_pct: PositiveFloat = 5.0
    budget_s: PositiveFloat = 180.0
    min_effect_pct: NonNegativeFloat = 0.0
    max_repetitions: PositiveInt = 30


class Experiment(Model):
    name: str
    baseline: StackSpec
    variants: tuple[StackSpec, ...] = ()
    workloads: tuple[Workload, ...]
    repetitions: PositiveInt = 3
    warmup: WarmupSpec = Field(default_factory=WarmupSpec)
    driver: Literal["oha", "ab", "wrk"] = "oha"
    order: Literal["interleaved", "random"] = "interleaved"
    seed: int = 0
    # Set for ramps: each launch measures its workloads in order (rising rates) and
    # stops at the first one that breaks this SLO.
    slo: SloSpec | None = None
    # The Django reference app's database (set by --database / --db-latency or [database]).
    database: DatabaseSpec | None = None
    # Each run measured in this many slices interleaved with every other run's, all the
    # runs' stacks alive at once (servelab.slices); 1: each run in one piece, in turn.
    # Experiments built from a file or a study choose it from their loads (about 1 s a
    # slice) wherever slicing applies: see ``default_slices``. Stored ones keep theirs
    # (records from before slices existed were measured in one piece).
    slices: PositiveInt = 1
    # Set: keep measuring until every comparison is clear or the budget is spent.
    stopping: StoppingSpec | None = None
    # Slices of one round's stacks measured at the same time, each by its own driver,
    # the stacks sharing the stack CPUs (duet benchmarking): the machine's moments then
    # fall on every variant alike. Figures are each stack's share; ratios compare.
    side_by_side: bool = False

    @model_validator(mode="after")
    def _check(self) -> Experiment:
        if not self.workloads:
            raise ValueError("an experiment needs at least one workload")
        if self.slices > 1:
            self._check_slices()
        if self.side_by_side and (
            self.slices == 1 or any(w.load.duration_s is None for w in self.workloads)
        ):
            raise ValueError(
                "side_by_side measures slices at the same time: it needs the oha driver, "
                "closed loads bounded by a duration, and more than one slice"
            )
        if self.stopping is not None and self.slices == 1:
            raise ValueError(
                "[stopping] adds interleaved rounds: it needs the oha driver, closed loads "
                "and more than one slice"
            )
        names = [s.name for s in self.stacks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"variant names must be unique; repeated: {', '.join(dupes)}")
        wl = [w.name for w in self.workloads]
        if len(set(wl)) != len(wl):
            raise ValueError("workload names must be unique")
        return self

    def _check_slices(self) -> None:
        if self.driver != "oha":
            raise ValueError(
                "slices need the oha driver (it keeps every request's latency, so the "
                "slices' percentiles can be merged)"
            )
        if self.slo is not None:
            raise ValueError("a ramp cannot be sliced: it measures rising rates in order")
        for workload in self.workloads:
            problem = slicing_problem(workload.load, self.slices)
            if problem:
                raise ValueError(f"workload {workload.name!r} cannot be sliced: {problem}")

    @property
    def stacks(self) -> tuple[StackSpec, ...]:
        """Baseline first, then the variants."""
        return (self.baseline, *self.variants)


# --------------------------------------------------------------------------
# Building experiments from dictionaries (TOML files, studies, CLI overrides)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``override`` merged in, recursively for tables."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """A copy of ``data`` with ``server.workers``-style key set to ``value``."""
    head, _, rest = dotted.partition(".")
    if not rest:
        return {**data, head: value}
    inner = data.get(head, {})
    if not isinstance(inner, dict):
        raise SpecError(f"cannot set {dotted!r}: {head!r} is not a table", "check the grid keys")
    return {**data, head: set_dotted(inner, rest, value)}


def format_value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def expand_grid(base: dict[str, Any], grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """One stack dict per combination of the grid's values, named after its values."""
    if not grid:
        return []
    keys = list(grid)
    for key in keys:
        if not isinstance(grid[key], list) or not grid[key]:
            raise SpecError(f"grid key {key!r} needs a non-empty list of values", "e.g. [1, 2, 3]")
    stacks = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        stack = dict(base)
        for key, value in zip(keys, combo, strict=True):
            stack = set_dotted(stack, key, value)
        label = ",".join(
            f"{k.rsplit('.', 1)[-1]}={format_value(v)}" for k, v in zip(keys, combo, strict=True)
        )
        stack["name"] = label
        stacks.append(stack)
    return stacks


def default_slices(data: dict[str, Any]) -> int:
    """Interleaved slices wherever they apply (oha, closed loads, no ramp); else 1."""
    if data.get("driver", "oha") != "oha" or data.get("slo") is not None:
        return 1
    try:
        loads = [Workload.model_validate(w).load for w in data.get("workloads") or ()]
    except ValidationError:
        return 1  # the workloads' own validation says what is wrong
    if not loads:
        return 1
    if data.get("side_by_side"):  # at least two slices of a second, about 3 s each
        return min(
            max(
                2 if (load.duration_s or 0) >= 2 * MIN_SLICE_S else 1,
                auto_slices(load, SIDE_BY_SIDE_SLICE_S),
            )
            for load in loads
        )
    return min(auto_slices(load) for load in loads)


def experiment_from_dict(data: dict[str, Any], *, source: str = "experiment") -> Experiment:
    """Validate a raw experiment dict (as read from TOML) into an Experiment.

    ``variants`` entries are overrides merged onto the baseline; ``grid`` maps
    dotted knob names to lists of values and adds one variant per combination.
    """
    data = dict(data)
    baseline = data.get("baseline", {})
    if not isinstance(baseline, dict):
        raise SpecError(f"{source}: 'baseline' must be a table", "write [baseline] with its knobs")
    baseline = {"name": "baseline", **baseline}
    variants = []
    for index, override in enumerate(data.pop("variants", []) or []):
        if not isinstance(override, dict):
            raise SpecError(f"{source}: variant {index + 1} must be a table", "use [[variants]]")
        if "name" not in override:
            raise SpecError(f"{source}: variant {index + 1} has no name", "add name = '...'")
        variants.append(deep_merge(baseline, override))
    grid = data.pop("grid", None) or {}
    if not isinstance(grid, dict):
        raise SpecError(
            f"{source}: 'grid' must be a table", "e.g. [grid] 'server.workers' = [1, 2]"
        )
    variants.extend(expand_grid(baseline, grid))
    data["baseline"] = baseline
    data["variants"] = variants
    if data.get("slices") is None:
        data["slices"] = default_slices(data)
    try:
        return Experiment.model_validate(data)
    except ValidationError as exc:
        raise SpecError(
            f"{source}: {describe_validation_error(exc)}", "correct that value"
        ) from None


def load_experiment_file(path: Path) -> Experiment:
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"experiment file {path} does not exist", "check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path} is not valid TOML: {exc}", "fix the TOML syntax") from None
    raw.setdefault("name", path.stem)
    return experiment_from_dict(raw, source=str(path))


def describe_validation_error(exc: ValidationError) -> str:
    """The first problem of a pydantic error, as 'where: what' on one line."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "value"
    message = first["msg"].removeprefix("Value error, ")
    extra = len(exc.errors()) - 1
    more = f" (and {extra} more problem{'s' if extra > 1 else ''})" if extra else ""
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    return f"{where}: {message}{more}"
