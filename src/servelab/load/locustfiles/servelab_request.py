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

Two User classes send the same request: ``FastRequestUser`` (FastHttpUser,
geventhttpclient: servelab's default, several times cheaper per request) and
``RequestUser`` (HttpUser, python-requests), chosen by servelab on the command line.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from locust import FastHttpUser, HttpUser, TaskSet, constant, events
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment


@events.init_command_line_parser.add_listener
def _options(parser: LocustArgumentParser, **_kwargs: Any) -> None:
    parser.add_argument("--servelab-request", default="{}", include_in_web_ui=False)


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

    def send(self) -> None:
        r = self._servelab
        paths = r["paths"]
        path = paths[0] if len(paths) == 1 else random.choices(paths, weights=r["weights"])[0]
        with self.client.request(
            r["method"], path, headers=r["headers"], data=r["body"], catch_response=True,
            name=path, **self._extra,
        ) as response:
            if response.status_code == r["expect"]:
                response.success()
            elif response.status_code:
                response.failure(f"status {response.status_code}, expected {r['expect']}")
            else:  # no answer: keep the client's own error (refused, reset, timeout)
                response.failure(response.error or "no answer")


class FastRequestUser(_Sends, FastHttpUser):
    wait_time = constant(0)
    # A mixin's @task is not collected. (Locust's User declares tasks per instance: no
    # ClassVar.)
    tasks: list[TaskSet | Callable[..., Any]] = [_Sends.send]  # noqa: RUF012

    def __init__(self, environment: Environment) -> None:
        timeout = float(_request(environment)["timeout_s"])
        self.network_timeout = self.connection_timeout = timeout
        super().__init__(environment)
        self._prepare()


class RequestUser(_Sends, HttpUser):
    wait_time = constant(0)
    tasks: list[TaskSet | Callable[..., Any]] = [_Sends.send]  # noqa: RUF012 (as above)

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self._prepare(extra={"timeout": float(_request(environment)["timeout_s"])})
