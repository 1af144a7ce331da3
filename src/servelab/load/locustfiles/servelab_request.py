"""servelab's built-in scenario: each User sends the workload's request (the seed app's
endpoints in the studies, the user's ``--path``/``--body-file`` with ``--app``, or a
weighted mix of paths such as the Django reference app's pages), with no wait between
requests unless servelab paces the Users (open model, ``servelab_hooks``). Like every
servelab driver it asks for uncompressed answers (``Accept-Encoding: identity``) unless
the workload's headers say otherwise.

The request arrives as ``--servelab-request JSON`` (method, path, headers, body,
content_type, mix, expect_status, keepalive, timeout_s), which Locust also forwards to
its workers. An answer other than the expected status is a failure named
``status N, expected M``.

A replayed access log is sent by ``ReplayUser`` (``replay_user.py``), imported here so
that every worker running this scenario serves replays too.

Two User classes send the same request: ``FastRequestUser`` (FastHttpUser,
geventhttpclient: servelab's default, several times cheaper per request) and
``RequestUser`` (HttpUser, python-requests), chosen by servelab on the command line.

The open model (``--servelab-schedule-rate R``, each User's share of the rate): each
process keeps one schedule, evenly spaced send times at R times its Users
(``servelab.load.schedule.Schedule``), and its next free User takes the next time, as
oha's connections do; a slow answer holds only its own User. A User that takes a time
already past (all were busy) sends at once, and each request's response time is counted
from its *intended* send time, as oha and wrk2 count it (no coordinated omission; give
enough Users that one is free, rate x latency). A User waits for its send time in Locust's
``wait_time``, where a stopping run ends it. A process's schedule lasts
``--servelab-run-time`` seconds from its first send time, by its own clock: a worker on
another machine whose stop message comes late sends no more than the run's length. Each
process counts what it sent (``sent_so_far``): the hooks report it by machine.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from typing import Any

from locust import FastHttpUser, HttpUser, TaskSet, events
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment
from locust.runners import STATE_RUNNING, STATE_SPAWNING

from servelab.load.locustfiles.replay_user import ReplayUser
from servelab.load.schedule import Schedule, count_send

__all__ = ["FastRequestUser", "ReplayUser", "RequestUser"]  # ReplayUser: a replayed log


@events.init_command_line_parser.add_listener
def _options(parser: LocustArgumentParser, **_kwargs: Any) -> None:
    parser.add_argument("--servelab-request", default="{}", include_in_web_ui=False)
    parser.add_argument(
        "--servelab-schedule-rate", type=float, default=0.0, include_in_web_ui=False
    )


# What this process sent on schedules: [requests, first send, last send] (perf_counter s).
sent_so_far: list[float] = [0, 0.0, 0.0]
SENDING = (STATE_SPAWNING, STATE_RUNNING)  # a runner's states that send
# This process's schedule; made anew in a process forked after this file was loaded
# (Locust's --processes), whose schedule must not run in step with its siblings'.
_process: dict[str, Any] = {}


def _schedule(length_s: float) -> Schedule:
    if _process.get("pid") != os.getpid():
        schedule = Schedule(random.SystemRandom().random(), length_s)
        _process.update(pid=os.getpid(), schedule=schedule)
    return _process["schedule"]


@events.init.add_listener
def _share_sent(environment: Environment, **_kwargs: Any) -> None:
    """What this process sent, where servelab's hooks read it for their report."""
    environment.servelab_sent = sent_so_far  # type: ignore[attr-defined]


def _request(environment: Environment) -> dict[str, Any]:
    text = getattr(environment.parsed_options, "servelab_request", "{}") or "{}"
    request: dict[str, Any] = {"method": "GET", "path": "/", "headers": {}, "body": None,
               "content_type": "application/json", "mix": [], "expect_status": 200,
               "keepalive": True, "timeout_s": 30.0}
    request.update(json.loads(text))
    return request


class _Sends:
    """The task both User classes share; ``_extra`` holds client-specific arguments."""

    # Given by the User class it is mixed into.
    environment: Environment
    client: Any  # HttpSession or FastHttpSession: request(..., catch_response=True)
    _extra: dict[str, Any]
    _servelab: dict[str, Any]

    def _prepare(self, extra: dict[str, Any] | None = None) -> None:
        self._extra = dict(extra or {})
        request = _request(self.environment)
        headers = dict(request["headers"])
        if request["body"] is not None and not any(h.lower() == "content-type" for h in headers):
            headers["Content-Type"] = request["content_type"]
        if not request["keepalive"]:
            headers["Connection"] = "close"
        # Both clients ask for gzip by default; servelab's drivers send the same request
        # (oha runs with --disable-compression): compressed answers only when the
        # workload's own headers ask for them.
        if not any(h.lower() == "accept-encoding" for h in headers):
            headers["Accept-Encoding"] = "identity"
        mix = request["mix"] or [[request["path"], 1]]
        self._servelab = {
            "method": request["method"],
            "headers": headers,
            "body": request["body"].encode() if request["body"] is not None else None,
            "paths": [path for path, _ in mix],
            "weights": [weight for _, weight in mix],
            "expect": int(request["expect_status"]),
        }

    def _rate(self) -> float:
        """Each User's share of the schedule's rate; 0: no schedule (closed model)."""
        return getattr(self.environment.parsed_options, "servelab_schedule_rate", 0.0) or 0.0

    def servelab_wait(self) -> float:
        """Locust's wait_time: on a schedule, take the process's next send time and wait
        for it (none when it is past); 0 otherwise."""
        rate = self._rate()
        if rate <= 0:
            return 0.0
        users = max(1, self.environment.runner.target_user_count)  # type: ignore[union-attr]
        now = time.perf_counter()
        length_s = getattr(self.environment.parsed_options, "servelab_run_time", 0.0) or 0.0
        schedule = _schedule(length_s)
        at = schedule.claim(now, 1.0 / (rate * users))
        # Past the schedule's length no send (the stop is on its way): none taken.
        self.__dict__["_servelab_at"] = at if schedule.sends(at) else None
        return max(0.0, at - now)

    def send(self) -> None:
        intended = None
        if self._rate() > 0:
            intended = self.__dict__.pop("_servelab_at", None)
            if intended is None:  # before its first wait, or past the schedule's length
                return
            if self.environment.runner.state not in SENDING:  # type: ignore[union-attr]
                return  # the run is ending: no new requests (those in flight are answered)
            count_send(sent_so_far, time.perf_counter())
        r = self._servelab
        paths = r["paths"]
        path = paths[0] if len(paths) == 1 else random.choices(paths, weights=r["weights"])[0]
        with self.client.request(
            r["method"], path, headers=r["headers"], data=r["body"], catch_response=True,
            name=path, **self._extra,
        ) as response:
            if intended is not None:  # from the intended send time (see the module's doc)
                response.request_meta["response_time"] = 1000 * (time.perf_counter() - intended)
            if response.status_code == r["expect"]:
                response.success()
            elif response.status_code:
                response.failure(f"status {response.status_code}, expected {r['expect']}")
            else:  # no answer: keep the client's own error (refused, reset, timeout)
                response.failure(response.error or "no answer")


def _wait_time(user: Any) -> float:
    return user.servelab_wait()


class FastRequestUser(_Sends, FastHttpUser):
    wait_time = _wait_time
    # A mixin's @task is not collected. (Locust's User declares tasks per instance: no
    # ClassVar.)
    tasks: list[TaskSet | Callable[..., Any]] = [_Sends.send]  # noqa: RUF012

    def __init__(self, environment: Environment) -> None:
        timeout = float(_request(environment)["timeout_s"])
        self.network_timeout = self.connection_timeout = timeout
        super().__init__(environment)
        self._prepare()


class RequestUser(_Sends, HttpUser):
    wait_time = _wait_time
    tasks: list[TaskSet | Callable[..., Any]] = [_Sends.send]  # noqa: RUF012 (as above)

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self._prepare(extra={"timeout": float(_request(environment)["timeout_s"])})
