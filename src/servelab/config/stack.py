"""One stack to measure: the app, its app server, the front in front of it, the network."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from servelab.config.base import (
    Model,
    NonNegativeInt,
    PositiveInt,
)


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

