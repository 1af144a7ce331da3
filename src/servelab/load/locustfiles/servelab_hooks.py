"""servelab's side of every Locust run, loaded beside the scenario (``-f scenario.py,this``).

The scenario itself (the user's locustfile) is left as it is. This file only:

- adds the ``--servelab-*`` options servelab passes (Locust forwards custom options
  to its workers with every spawn message);
- stops the run after ``--servelab-run-time`` seconds (fractions allowed: Locust's own
  ``--run-time`` takes whole seconds), counted from the Users' spawning complete (on a
  master: its workers', each of which has started its Users; a worker on another machine
  hears the spawn message late), once the expected workers have connected; requests in
  flight then are waited for (up to ``--stop-timeout``) and counted;
- with ``--servelab-user-rate R``, paces every User at R task runs per second
  (Locust's ``constant_throughput``), replacing the scenario's own ``wait_time``:
  servelab's open model for a locustfile (the built-in scenario keeps a schedule of its
  own, ``--servelab-schedule-rate``: see servelab_request.py);
- when Locust quits (master or single process), with ``--servelab-report``, prints one
  line to stdout, after the statistics Locust's ``--json`` printed there: the
  failures by request and message (``RequestStats.serialize_errors``, the same as
  Locust's ``_failures.csv``), the User classes and their HTTP client, the workers
  that took part (by machine: processes, requests, highest CPU use, Locust's CPU
  warning), workers lost during the run, and whether Locust warned that a process's
  CPU was above 90 %;
- on a master waiting for workers, prints a ``{"servelab_waiting": ...}`` line to stderr
  whenever the machines connected change (what the "gave up waiting" error names), and
  a ``{"servelab_started": ...}`` line as the load starts, with the machines it starts
  with (what servelab's console says while the run goes);
- workers that serve a whole experiment (``servelab locust-worker`` restarts each one
  the master quits, see ``servelab.load.locust_worker``): a master that is finishing
  answers no new worker (a restarted worker then asks again, a second later, and finds
  the next run's master), and one that hears a heartbeat from a worker it does not know
  (a worker of a master that was killed) tells it to quit, so that it restarts and
  connects. A worker names its machine (``SERVELAB_WORKER_MACHINE``, else the host
  name) as soon as it is connected, and in every report.

Request statistics themselves come from Locust's own ``--json``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

import gevent
import locust.runners
from locust import FastHttpUser, HttpUser, User, constant_throughput, events
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment
from locust.rpc import Message
from locust.runners import STATE_MISSING, MasterRunner, Runner, WorkerRunner

from servelab.load.schedule import send_rate

MACHINE_ENV = "SERVELAB_WORKER_MACHINE"
MACHINE_MESSAGE = "servelab_machine"
_state: dict[str, Any] = {}
SPAWN_GRACE_S = 10.0  # a run whose Users never report spawning complete stops this late

if os.environ.get(MACHINE_ENV):
    # A supervised worker (servelab locust-worker): ask for a master every second, not
    # every 5 s (a restarted worker's first request may reach the master that is
    # finishing, which does not answer it), and for 5 minutes before giving up (the
    # supervisor then starts it again).
    locust.runners.CONNECT_TIMEOUT = 1
    locust.runners.CONNECT_RETRY_COUNT = 300


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
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        _state["machines"] = {}  # client id -> machine name
        _state["by_worker"] = {}  # client id -> {"requests": n, "cpu_max": %}
        _state["lost"] = {}  # client id -> how it was lost
        _state["ready_at"] = time.monotonic()  # the master is up; waiting for workers
        # This master's own handler, wrapped (client_listener calls self.handle_message).
        runner.handle_message = _guarded(  # type: ignore[method-assign, assignment]
            runner, runner.handle_message
        )
        runner.register_message(MACHINE_MESSAGE, _machine_named)
        gevent.spawn(_watch_waiting, runner)
    elif isinstance(runner, WorkerRunner):  # connected by now: name the machine at once
        runner.send_message(MACHINE_MESSAGE, {"machine": _own_machine()})


def _own_machine() -> str:
    return os.environ.get(MACHINE_ENV) or socket.gethostname()


def _machine_named(environment: Environment, msg: Message, **_kwargs: Any) -> None:
    _state["machines"][msg.node_id] = str(msg.data["machine"])


@events.report_to_master.add_listener
def _name_machine(client_id: str, data: dict[str, Any], **_kwargs: Any) -> None:
    """A worker's report: its machine, and its CPU seconds and wall seconds since its test
    started (Locust's own CPU figure is sampled every 5 s: none in a short run)."""
    data["servelab_machine"] = _own_machine()
    sent = _sent()
    if sent is not None:
        data["servelab_sent"] = sent
    if "cpu_from" in _state:
        wall0, cpu0 = _state["cpu_from"]
        data["servelab_cpu"] = [_cpu_s() - cpu0, time.monotonic() - wall0]


def _sent() -> list[float] | None:
    """This process's scheduled sends so far: [requests, first, last send (s)]; None
    when it sends on no schedule (a locustfile's Users, or the closed model)."""
    environment = _state.get("environment")
    sent = getattr(environment, "servelab_sent", None)
    return list(sent) if sent and sent[0] else None


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def _machine(client_id: str) -> str:
    """The machine of a worker: as it said in a report, else its client id's host name."""
    return _state.get("machines", {}).get(client_id) or client_id.rsplit("_", 1)[0]


def _guarded(
    runner: MasterRunner, handle: Callable[[str, Message], None]
) -> Callable[[str, Message], None]:
    """The master's message handler, with servelab's rules for workers that come and go."""

    def handle_message(client_id: str, msg: Message) -> None:
        if msg.type == "client_ready" and _state.get("finishing"):
            return  # a worker restarted for the next run: the next master answers it
        if msg.type == "heartbeat" and msg.node_id not in runner.clients:
            # A worker of a master that is gone (killed, so it never said quit): quit
            # now, so that its supervisor restarts it and it connects to this master.
            runner.server.send_to_client(Message("quit", None, msg.node_id))
            return
        if (
            msg.type == "quit"
            and msg.node_id in runner.clients
            and not _state.get("finishing")
            and _state.get("started")
        ):
            _state["lost"][msg.node_id] = "quit"
        handle(client_id, msg)
        expected = getattr(runner.environment.parsed_options, "expect_workers", 0) or 0
        if (
            msg.type == "client_ready"
            and "workers_ready_s" not in _state
            and len(runner.clients.ready) >= expected
        ):
            _state["workers_ready_s"] = time.monotonic() - _state["ready_at"]

    return handle_message


def _watch_waiting(runner: MasterRunner) -> None:
    """Until the test starts: a stderr line whenever the connected machines change."""
    said: dict[str, int] | None = None
    while not _state.get("started"):
        now = _connected(runner)
        if now != said:
            print(json.dumps({"servelab_waiting": now}), file=sys.stderr, flush=True)
            said = now
        gevent.sleep(0.5)


def _connected(runner: MasterRunner) -> dict[str, int]:
    """Machine -> worker processes connected (not missing)."""
    machines: dict[str, int] = {}
    for client in runner.clients.all:
        if client.state != STATE_MISSING:
            name = _machine(client.id)
            machines[name] = machines.get(name, 0) + 1
    return dict(sorted(machines.items()))


@events.test_start.add_listener
def _start(environment: Environment, **_kwargs: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        _state.setdefault("cpu_from", (time.monotonic(), _cpu_s()))
        return
    if isinstance(environment.runner, MasterRunner):
        _state["workers"] = environment.runner.worker_count
        _state["started"] = True
        # The workers the load starts with, by machine: what servelab's console says.
        print(json.dumps({"servelab_started": _connected(environment.runner)}),
              file=sys.stderr, flush=True)
        _state["waited_s"] = time.monotonic() - _state.get("ready_at", time.monotonic())
    run_time = _run_time(environment)
    if run_time > 0:
        # Timed from the Users' spawning complete (below); this only bounds a run whose
        # workers never say so.
        gevent.spawn_later(run_time + SPAWN_GRACE_S, _finish, environment.runner)


@events.spawning_complete.add_listener
def _spawned(**_kwargs: Any) -> None:
    """A run lasts its run time from when its Users have all started (a master's: its
    workers' Users), not from its own start: a worker on another machine hears the spawn
    message late, and the built-in scenario's schedules start there (they last the run
    time from their first send, see servelab_request.py), so none is cut short."""
    environment = _state.get("environment")
    if environment is None or isinstance(environment.runner, WorkerRunner):
        return
    run_time = _run_time(environment)
    if run_time > 0 and not _state.get("timed"):
        _state["timed"] = True
        gevent.spawn_later(run_time, _finish, environment.runner)


def _run_time(environment: Environment) -> float:
    return getattr(environment.parsed_options, "servelab_run_time", 0.0) or 0.0


def _finish(runner: Runner) -> None:
    """Quit, letting every user finish the request in flight (``--stop-timeout``, as
    oha's -w). A master first tells its workers to quit and waits for each one's final
    report (sent once its users have stopped): its own quit would wait only 0.5 s for
    them, and a slow request's answer would be lost. (Not ``runner.stop()``: stopped
    workers leave the master's list, then never get its quit and outlive it.)"""
    if _state.get("finishing"):
        return  # the other timer came first
    _state["finishing"] = True
    if isinstance(runner, MasterRunner):
        for client in runner.clients.all:
            if client.state == STATE_MISSING:
                _state["lost"].setdefault(client.id, "missing")
        pending = _state["awaiting"] = {
            client.id for client in runner.clients.all if client.state != STATE_MISSING
        }
        for client_id in list(pending):
            runner.server.send_to_client(Message("quit", None, client_id))
        deadline = time.monotonic() + (runner.environment.stop_timeout or 0) + 5
        while pending and time.monotonic() < deadline:
            gevent.sleep(0.05)
    runner.quit()


@events.worker_report.add_listener
def _reported(client_id: str, data: dict[str, Any], **_kwargs: Any) -> None:
    """A worker's report after its users stopped (user_count 0) is its final one. Every
    report counts the worker's requests since its last one, and its CPU use."""
    if data.get("user_count", 1) == 0:
        _state.get("awaiting", set()).discard(client_id)
    if "by_worker" not in _state:
        return
    if data.get("servelab_machine"):
        _state["machines"][client_id] = data["servelab_machine"]
    row = _state["by_worker"].setdefault(client_id, {"requests": 0, "cpu_pct": 0.0})
    row["requests"] += int((data.get("stats_total") or {}).get("num_requests", 0))
    if data.get("servelab_sent"):  # cumulative: the latest report holds all of it
        row["sent"] = data["servelab_sent"]
    cpu_s, wall_s = data.get("servelab_cpu") or (0.0, 0.0)
    if wall_s > 0:
        row["cpu_pct"] = 100.0 * cpu_s / wall_s
    node = _state["environment"].runner.clients.get(client_id)
    if node is not None and node.cpu_warning_emitted:
        row["cpu_warning"] = True


def _machines_report() -> list[dict[str, Any]]:
    """The workers of this run by machine: processes, requests, and the busiest process's
    CPU use (% of a core, from its test's start to its last report); whether Locust
    warned about one of them."""
    rows: dict[str, dict[str, Any]] = {}
    for client_id, seen in _state.get("by_worker", {}).items():
        name = _machine(client_id)
        row = rows.setdefault(
            name, {"machine": name, "processes": 0, "requests": 0, "cpu_max": 0.0,
                   "cpu_warning": False},
        )
        row["processes"] += 1
        row["requests"] += seen["requests"]
        if "sent" in seen:  # its processes send at the same time: their rates add up
            row["sent"] = row.get("sent", 0) + int(seen["sent"][0])
            row["send_rate"] = row.get("send_rate", 0.0) + send_rate(seen["sent"])
        row["cpu_max"] = max(row["cpu_max"], seen["cpu_pct"])
        row["cpu_warning"] = row["cpu_warning"] or seen.get("cpu_warning", False)
    return sorted(rows.values(), key=lambda r: r["machine"])


def _sends_total() -> dict[str, float] | None:
    rows = [seen["sent"] for seen in _state.get("by_worker", {}).values() if "sent" in seen]
    if not rows and (own := _sent()) is not None:  # no workers: this process sent
        rows = [own]
    if not rows:
        return None
    return {"requests": sum(int(r[0]) for r in rows),
            "rate": sum(send_rate(r) for r in rows)}


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
        "worker_machines": _machines_report(),
        # From the master's start to its workers' start (Locust looks once a second), and
        # to the moment the last expected worker was ready.
        "waited_s": _state.get("waited_s"),
        "workers_ready_s": _state.get("workers_ready_s"),
        # Workers that quit or went missing before the run's end; whether servelab ended
        # the run (not Locust, after its last worker quit).
        "workers_lost": sorted(_machine(c) for c in _state.get("lost", {})),
        "finished": bool(_state.get("finishing")),
        "cpu_warning": bool(runner.cpu_warning_emitted),
        "worker_cpu_warning": bool(getattr(runner, "worker_cpu_warning_emitted", False)),
        "errors": list(stats.serialize_errors().values()),
        # Exceptions the scenario's own code raised (not failed requests).
        "exceptions": [
            {"count": e["count"], "msg": e["msg"], "traceback": e["traceback"]}
            for e in runner.exceptions.values()
        ],
        # Scheduled sends (the built-in scenario's open model): by all processes, and
        # the rate they sent at (per machine: worker_machines).
        "sent": _sends_total(),
        "total": {
            "start_time": stats.total.start_time,
            "last_request_timestamp": stats.total.last_request_timestamp,
            "num_requests": stats.total.num_requests,
            "num_failures": stats.total.num_failures,
        },
    }
    print(json.dumps({"servelab_locust": report}), flush=True)
