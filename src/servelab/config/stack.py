"""One stack to measure: the app, its app server, the front in front of it, the network."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, model_validator

from servelab.config.base import (
    Model,
    NonNegativeInt,
    PositiveInt,
)

# The registries' names only: what each plug-in can do is asked above the model
# (servelab.prepare.checks), once the experiment is built.
from servelab.registry import DEFAULT_FRONT, DEFAULT_SERVER, FRONT_KINDS, SERVER_KINDS

# The registries' names, a tuple known at import: a Literal for pydantic (its error names
# the choices); mypy cannot read a Literal of a tuple built at run time and sees str.
if TYPE_CHECKING:
    ServerKind = str
    FrontKind = str
else:
    ServerKind = Literal[SERVER_KINDS]
    FrontKind = Literal[FRONT_KINDS]


class AppSpec(Model):
    """The app served: a built-in name or an import path ``package.module:attr``."""

    ref: str = "fastapi"
    app_dir: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)
    # The interpreter that runs the app and its app servers (servelab.apps.interpreter);
    # None: servelab's own.
    python: Path | None = None


class ServerSpec(Model):
    """The app server and its knobs. Defaults follow the seeds' config.

    Which of the optional knobs a server honours, and what each means for it, its
    module in ``servelab.servers`` says (``AppServer.knobs``, ``command``); giving a
    server a knob it lacks is an error naming the servers that have it
    (``servelab.prepare.checks``).
    """

    kind: ServerKind = DEFAULT_SERVER
    worker_class: Literal["uvicorn", "sync", "gthread"] = "uvicorn"  # the worker's kind
    workers: PositiveInt = 2
    threads: PositiveInt = 1  # per worker (for some servers: its I/O threads)
    # The threads that run the app's blocking code, per worker (where they are separate).
    blocking_threads: PositiveInt | None = None
    backlog: PositiveInt = 2048
    keepalive_s: PositiveInt = 5
    timeout_s: PositiveInt = 60
    # Restart a worker after this many requests (0 = never), plus randint(0, jitter).
    max_requests: NonNegativeInt = 0
    max_requests_jitter: NonNegativeInt = 0

    @model_validator(mode="after")
    def _check(self) -> ServerSpec:
        if self.max_requests_jitter and not self.max_requests:
            raise ValueError("max_requests_jitter needs max_requests > 0 (jitter adds to it)")
        return self


class ProxySpec(Model):
    """The reverse proxy in front of the app server (``none``, nginx or Apache httpd).

    Apache maps the shared knobs onto its own directives (``timeout_s``:
    Timeout and the ProxyPass timeouts, ``client_keepalive_*``: KeepAliveTimeout
    and MaxKeepAliveRequests, ``gzip``: mod_deflate, ``upstream_keepalive``:
    mod_proxy's per-child connection pool); the nginx-only ones
    (NGINX_ONLY_KNOBS) must stay at their defaults, and the Apache ones
    (APACHE_KNOBS) unset with nginx.
    """

    kind: FrontKind = DEFAULT_FRONT
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
    # nginx only: log every request's client address in the stack's own directory, and
    # count each run's requests by client address (RunRecord.front_requests_by_client).
    # Off by default: logging costs the front a write per request.
    access_log: bool = False
    # Apache only; None = Apache's own default. mpm None runs the event MPM.
    mpm: Literal["prefork", "worker", "event"] | None = None
    max_request_workers: PositiveInt | None = None
    threads_per_child: PositiveInt | None = None  # worker and event MPMs only
    start_servers: PositiveInt | None = None

    @model_validator(mode="after")
    def _check(self) -> ProxySpec:
        if self.protocol != "http" and self.upstream_keepalive:
            raise ValueError(
                f"upstream_keepalive is measured over HTTP only; set it to 0 with protocol "
                f"{self.protocol!r}"
            )
        return self

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

