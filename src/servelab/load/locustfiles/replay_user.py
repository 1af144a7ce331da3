"""A replayed access log sent by Locust's processes: ``ReplayUser``, part of the built-in
request scenario (``servelab_request.py`` imports it, so that ``servelab locust-worker``
and a plain ``locust --worker -f servelab_request.py`` serve replays too).

Where one machine cannot send a log's rate, its requests are split over Locust workers,
on this machine (``--locust-processes``) or on others (``--expect-workers``):

- the master reads the schedule servelab wrote (``--servelab-replay PATH``) as its test
  starts and deals it to the workers that get Users, request i to worker i mod N
  (``load.schedule.split_shares``: each share keeps the log's shape at 1/N of its rate),
  each with a message of its own sent before the spawn message; a single process keeps
  the whole;
- a process's Users take its share's requests in order, each waiting for its request's
  time (``load.schedule.ReplayShare``: the share's clock starts at its first claim, by
  the process's own clock), and send its method, target and body;
- each request is written down as vegeta's sender writes it (number in the schedule,
  sent and latency in microseconds, status, bytes, method, target, error): workers hand
  theirs to the master with each report, and the master (or the single process) writes
  them all to ``--servelab-replay-sent`` as it quits. servelab reads that file as it
  reads vegeta's (``load.replay_figures``): latency from each request's intended time,
  and the replay's fidelity.

A worker's send times are counted from its own start, so the fidelity figures are each
worker's against its share; the few milliseconds between machines' starts (the spawn
message's way over the network) are not in them. Locust's own statistics count each
request by its route, its response time from the intended send time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from locust import FastHttpUser, events, task
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment
from locust.rpc import Message
from locust.runners import (
    STATE_RUNNING,
    STATE_SPAWNING,
    LocalRunner,
    MasterRunner,
    WorkerRunner,
)

from servelab.load.schedule import (
    ReplayShare,
    ShareEntry,
    count_send,
    read_share_entries,
    split_shares,
)

SHARE_MESSAGE = "servelab_replay_share"
ROWS_KEY = "servelab_replay_rows"
SENDING = (STATE_SPAWNING, STATE_RUNNING)
IDLE_S = 0.5  # a User whose process's share is done waits for the stop this long at a time
# This process's share, and its sent requests not yet handed on (a worker's) or written
# (a master's: every worker's; a single process's: its own).
_process: dict[str, Any] = {"share": None, "rows": []}


@events.init_command_line_parser.add_listener
def _options(parser: LocustArgumentParser, **_kwargs: Any) -> None:
    parser.add_argument("--servelab-replay", default="", include_in_web_ui=False)
    parser.add_argument("--servelab-replay-speed", type=float, default=1.0,
                        include_in_web_ui=False)
    parser.add_argument("--servelab-replay-until", type=float, default=0.0,
                        include_in_web_ui=False)
    parser.add_argument("--servelab-replay-sent", default="", include_in_web_ui=False)


def _option(environment: Environment, name: str, default: Any) -> Any:
    return getattr(environment.parsed_options, name, default) or default


@events.init.add_listener
def _init(environment: Environment, **_kwargs: Any) -> None:
    _process["environment"] = environment
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        runner.register_message(SHARE_MESSAGE, _share_received)


def _share_received(environment: Environment, msg: Message, **_kwargs: Any) -> None:
    data = msg.data
    _process["share"] = ReplayShare(
        [tuple(e) for e in data["entries"]],
        data["bodies"], float(data["speed"]),
    )
    _process["rows"] = []


@events.test_start.add_listener
def _deal(environment: Environment, **_kwargs: Any) -> None:
    """On the master (or a single process) as its test starts: the schedule, dealt."""
    path = _option(environment, "servelab_replay", "")
    runner = environment.runner
    if not path or isinstance(runner, WorkerRunner):
        return
    speed = float(_option(environment, "servelab_replay_speed", 1.0))
    entries = read_share_entries(path, speed, _option(environment, "servelab_replay_until", 0.0))
    bodies = _bodies(path)
    _process["rows"] = []
    if isinstance(runner, LocalRunner):
        _process["share"] = ReplayShare(entries, bodies, speed)
    elif isinstance(runner, MasterRunner):
        # The workers that start() is about to give Users (test_start fires before it
        # sends them the spawn message): a share each.
        workers = sorted(
            c.id for c in runner.clients.ready + runner.clients.running + runner.clients.spawning
        )
        for worker, share in zip(workers, split_shares(entries, len(workers)), strict=True):
            data = {"entries": share, "bodies": bodies, "speed": speed}
            runner.send_message(SHARE_MESSAGE, data, worker)


def _bodies(path: str) -> list[dict[str, str]]:
    bodies = Path(path).with_suffix(".bodies.json")  # beside the schedule, as it is written
    return list(json.loads(bodies.read_text())) if bodies.is_file() else []


@events.report_to_master.add_listener
def _hand_on(client_id: str, data: dict[str, Any], **_kwargs: Any) -> None:
    """A worker's report carries its requests sent since the last one."""
    rows, _process["rows"] = _process["rows"], []
    if rows:
        data[ROWS_KEY] = rows


@events.worker_report.add_listener
def _gather(client_id: str, data: dict[str, Any], **_kwargs: Any) -> None:
    _process["rows"].extend(data.get(ROWS_KEY) or ())


@events.quit.add_listener
def _write(exit_code: int, **_kwargs: Any) -> None:
    """The master's (or single process's) record of every request, for servelab."""
    environment = _process.get("environment")
    if environment is None or isinstance(environment.runner, WorkerRunner):
        return
    path = _option(environment, "servelab_replay_sent", "")
    if not path:
        return
    with open(path, "w") as f:
        for row in sorted(_process["rows"], key=lambda r: r[0]):
            f.write("\t".join(str(v) for v in row) + "\n")


class ReplayUser(FastHttpUser):
    """Sends its process's share of a replayed log, each request at its time."""

    def __init__(self, environment: Environment) -> None:
        request: dict[str, Any] = {"headers": {}, "keepalive": True, "timeout_s": 30.0}
        request.update(json.loads(_option(environment, "servelab_request", "{}")))
        self.network_timeout = self.connection_timeout = float(request["timeout_s"])
        super().__init__(environment)
        headers = dict(request["headers"])
        if not request["keepalive"]:
            headers["Connection"] = "close"
        if not any(h.lower() == "accept-encoding" for h in headers):
            headers["Accept-Encoding"] = "identity"  # as every servelab driver asks
        self._headers = headers
        self._claimed: tuple[ShareEntry, float] | None = None

    def wait_time(self) -> float:
        share: ReplayShare | None = _process["share"]
        now = time.perf_counter()
        self._claimed = share.claim(now) if share is not None else None
        if self._claimed is None:
            return IDLE_S
        return max(0.0, self._claimed[1] - now)

    @task
    def send(self) -> None:
        claimed, self._claimed = self._claimed, None
        if claimed is None or self.environment.runner.state not in SENDING:
            return  # before its first wait, a share done, or a run ending
        (seq, _due, method, target, body, route), intended = claimed
        share: ReplayShare = _process["share"]
        assert share.started_at is not None
        headers, data = self._headers, None
        if body >= 0:
            template = share.bodies[body]
            headers = {**headers, "Content-Type": template["content_type"]}
            data = str(template["body"])
        sent_at = time.perf_counter()
        count_send(self.environment.servelab_sent, sent_at)
        with self.client.request(
            method, target, headers=headers, data=data, catch_response=True, name=route
        ) as response:
            answered = time.perf_counter()
            status = int(response.status_code or 0)
            error = "" if status else str(response.error or "no answer")
            length = response.request_meta.get("response_length") or 0
            response.request_meta["response_time"] = 1000 * (answered - intended)
            if 0 < status < 400:
                response.success()
            else:
                response.failure(error or f"status {status}")
        _process["rows"].append((
            seq, round((sent_at - share.started_at) * 1e6), round((answered - sent_at) * 1e6),
            status, int(length), method, target, error.replace("\t", " ").replace("\n", " "),
        ))
