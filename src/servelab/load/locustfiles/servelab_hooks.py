"""servelab's side of every Locust run, loaded beside the scenario (``-f scenario.py,this``).

The scenario itself (the user's locustfile) is left as it is. This file only:

- adds the ``--servelab-*`` options servelab passes (Locust forwards custom options
  to its workers with every spawn message);
- stops the run after ``--servelab-run-time`` seconds (fractions allowed: Locust's own
  ``--run-time`` takes whole seconds), counted from the test's start, once the
  expected workers have connected; requests in flight then are waited for (up to
  ``--stop-timeout``) and counted;
- with ``--servelab-user-rate R``, paces every User at R task runs per second
  (Locust's ``constant_throughput``), replacing the scenario's own ``wait_time``:
  servelab's open model;
- when Locust quits (master or single process), with ``--servelab-report``, prints one
  line to stdout, after the statistics Locust's ``--json`` printed there: the
  failures by request and message (``RequestStats.serialize_errors``, the same as
  Locust's ``_failures.csv``), the User classes and their HTTP client, the workers
  that took part, and whether Locust warned that a process's CPU was above 90 %.

Request statistics themselves come from Locust's own ``--json``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import gevent
from locust import FastHttpUser, HttpUser, User, constant_throughput, events
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment
from locust.rpc import Message
from locust.runners import MasterRunner, Runner, WorkerRunner

_state: dict[str, Any] = {}


@events.init_command_line_parser.add_listener
def _options(parser: LocustArgumentParser, **_kwargs: Any) -> None:
    parser.add_argument("--servelab-report", action="store_true", include_in_web_ui=False)
    parser.add_argument("--servelab-run-time", type=float, default=0.0, include_in_web_ui=False)
    parser.add_argument("--servelab-user-rate", type=float, default=0.0, include_in_web_ui=False)


def _client(cls: type[User]) -> str:
    if issubclass(cls, FastHttpUser):
        return "FastHttpUser"
    if issubclass(cls, HttpUser):
        return "HttpUser"
    return "User"


def _paced(own: Callable[[User], float]) -> Callable[[User], float]:
    """``own`` wait_time, unless servelab asked for a rate: then constant_throughput."""

    def wait_time(user: User) -> float:
        options = user.environment.parsed_options
        rate = getattr(options, "servelab_user_rate", 0.0) or 0.0
        if rate <= 0:
            return own(user)
        pacing = user.__dict__.get("_servelab_pacing")
        if pacing is None:
            pacing = user.__dict__["_servelab_pacing"] = constant_throughput(rate)
        return pacing(user)

    return wait_time


@events.init.add_listener
def _init(environment: Environment, **_kwargs: Any) -> None:
    _state["environment"] = environment
    for cls in environment.user_classes:
        if not getattr(cls, "_servelab_paced", False):
            cls.wait_time = _paced(cls.wait_time)
            # servelab's mark on the scenario's own class (paced once, subclasses too).
            cls._servelab_paced = True  # type: ignore[attr-defined]


@events.test_start.add_listener
def _start(environment: Environment, **_kwargs: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        return
    if isinstance(environment.runner, MasterRunner):
        _state["workers"] = environment.runner.worker_count
    run_time = getattr(environment.parsed_options, "servelab_run_time", 0.0) or 0.0
    if run_time > 0:
        gevent.spawn_later(run_time, _finish, environment.runner)


def _finish(runner: Runner) -> None:
    """Quit, letting every user finish the request in flight (``--stop-timeout``, as
    oha's -w). A master first tells its workers to quit and waits for each one's final
    report (sent once its users have stopped): its own quit would wait only 0.5 s for
    them, and a slow request's answer would be lost. (Not ``runner.stop()``: stopped
    workers leave the master's list, then never get its quit and outlive it.)"""
    if isinstance(runner, MasterRunner):
        pending = _state["awaiting"] = {client.id for client in runner.clients.all}
        for client_id in list(pending):
            runner.server.send_to_client(Message("quit", None, client_id))
        deadline = time.monotonic() + (runner.environment.stop_timeout or 0) + 5
        while pending and time.monotonic() < deadline:
            gevent.sleep(0.05)
    runner.quit()


@events.worker_report.add_listener
def _reported(client_id: str, data: dict[str, Any], **_kwargs: Any) -> None:
    """A worker's report after its users stopped (user_count 0) is its final one."""
    if data.get("user_count", 1) == 0:
        _state.get("awaiting", set()).discard(client_id)


@events.quit.add_listener
def _quit(exit_code: int, **_kwargs: Any) -> None:
    environment = _state.get("environment")
    if environment is None or isinstance(environment.runner, WorkerRunner):
        return
    if not getattr(environment.parsed_options, "servelab_report", False):
        return
    runner = environment.runner
    stats = runner.stats
    report = {
        "exit_code": exit_code,
        "user_classes": {cls.__name__: _client(cls) for cls in environment.user_classes},
        "workers": _state.get("workers", 0),  # connected when the test started
        "cpu_warning": bool(runner.cpu_warning_emitted),
        "worker_cpu_warning": bool(getattr(runner, "worker_cpu_warning_emitted", False)),
        "errors": list(stats.serialize_errors().values()),
        # Exceptions the scenario's own code raised (not failed requests).
        "exceptions": [
            {"count": e["count"], "msg": e["msg"], "traceback": e["traceback"]}
            for e in runner.exceptions.values()
        ],
        "total": {
            "start_time": stats.total.start_time,
            "last_request_timestamp": stats.total.last_request_timestamp,
            "num_requests": stats.total.num_requests,
            "num_failures": stats.total.num_failures,
        },
    }
    print(json.dumps({"servelab_locust": report}), flush=True)
