"""What the load driver sends and how: the request, the load model, warm-up, a ramp's SLO."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from servelab.config.base import (
    MAX_REQUESTS_PER_RUN,
    MAX_RUN_S,
    Model,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
)

# RFC 9110 5.6.2: a header's name is a token.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# RFC 9110 5.5: a field value holds visible characters, spaces and tabs; never CR, LF,
# NUL or another control character (a line break would end the header, or the request).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# RFC 3986 3.3, 3.4 (RFC 9112 3.2's origin-form): the characters of a path and query, and
# %XX escapes.
_PATH_PART = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2}")


def header_problem(name: str, value: str) -> str | None:
    """What makes ``name: value`` not an HTTP header field (RFC 9110), or None."""
    if not _TOKEN.fullmatch(name):
        return (f"header name {name!r} is not an HTTP token (letters, digits and "
                "!#$%&'*+-.^_`|~ only)")
    bad = _CONTROL.search(value)
    if bad:
        return (f"header {name!r} has the control character {bad.group()!r} in its value "
                "(a header is one line)")
    return None


def path_problem(path: str) -> str | None:
    """What makes ``path`` not the target of a request line (absolute path and query),
    or None."""
    if not path.startswith("/"):
        return f"path {path!r} must start with '/'"
    at = 0
    while at < len(path):
        part = _PATH_PART.match(path, at)
        if part is None:
            return (f"path {path!r} has {path[at]!r}, which a request line cannot carry "
                    "(percent-encode it: %20 for a space)")
        at = part.end()
    return None


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
            problem = path_problem(path)
            if problem:
                raise ValueError(problem)
        for name, value in (*self.headers.items(), ("Content-Type", self.content_type)):
            problem = header_problem(name, value)
            if problem:
                raise ValueError(problem)
        return self


class LoadSpec(Model):
    """How hard and how long: closed model (concurrency) or open model (fixed rate).

    Every run is bounded: a request count, a duration, or both; the driver is
    also killed after ``max_time_s``. The ``bursts`` model sends ``burst_size``
    requests at once, then waits ``burst_gap_s``, and again (idle-then-reuse).
    """

    model: Literal["closed", "open", "bursts", "replay"] = "closed"
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
    # The replay model: the schedule file servelab prepared from a workload's ``replay``
    # (servelab.traffic.schedule), its times divided by ``speed``.
    schedule: str | None = None
    speed: PositiveFloat = 1.0

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
        if (self.model == "replay") != (self.schedule is not None):
            raise ValueError("the replay model, and it only, takes a schedule (a replay workload)")
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


class BodySpec(Model):
    """The body a replayed route's requests carry (access logs keep none)."""

    body: str
    content_type: str = "application/json"


class ReplaySpec(Model):
    """An access log replayed: each request at its logged time (from the window's start)
    divided by ``speed``, its path and query as logged (servelab.traffic)."""

    log: tuple[str, ...]  # files read as one stream, in this order (gzip or plain)
    format: str = "auto"  # combined, common, json, or an nginx log_format string
    fields: dict[str, str] = Field(default_factory=dict)  # json: servelab name -> key
    window: tuple[NonNegativeFloat, PositiveFloat] | None = None  # s from the first request
    speed: PositiveFloat = 1.0
    routes: tuple[str, ...] = ()  # fnmatch patterns of routes or paths kept
    methods: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()  # codes or classes ("2xx") kept
    bodies: dict[str, BodySpec] = Field(default_factory=dict)  # route pattern -> body
    anonymise: bool = False  # query values replaced by stable hashes
    seed: int = 0  # spreading a whole second's requests within it
    connections: PositiveInt = 1000  # the sender's at most
    timeout_s: PositiveFloat = 10.0

    @model_validator(mode="before")
    @classmethod
    def _one_log(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("log"), str):
            data = {**data, "log": (data["log"],)}
        return data

    @model_validator(mode="after")
    def _check(self) -> ReplaySpec:
        if not self.log:
            raise ValueError("a replay needs its access log: log = \"access.log\"")
        if self.window is not None and self.window[1] <= self.window[0]:
            raise ValueError(f"the replay window {list(self.window)} ends before it starts")
        self_methods = [m.upper() for m in self.methods]
        if self_methods != list(self.methods):
            raise ValueError("replay methods are upper case: methods = [\"GET\"]")
        return self


class Workload(Model):
    """What is sent: a request under a load model, or an access log replayed (``replay``,
    which preparation turns into the replay model's load)."""

    name: str
    request: RequestSpec = Field(default_factory=RequestSpec)
    load: LoadSpec = Field(default_factory=lambda: LoadSpec(requests=1000))
    replay: ReplaySpec | None = None


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


