"""Locust's own settings (``--locustfile``, ``--locust-processes``, ``--expect-workers``...),
stored with the experiment as its ``driver_options``, and the built-in scenarios they
name (``locustfiles/``). The driver that runs them: ``locust.py``."""

from __future__ import annotations

import ipaddress
import json
from importlib import resources
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from servelab.config.base import Model
from servelab.config.load import LoadSpec, RequestSpec

# Built-in scenarios, by the name --locustfile takes.
SCENARIOS = {"request": "servelab_request.py", "django": "servelab_django.py"}
DEFAULT_SCENARIO = "request"
DEFAULT_USERS = {"request": ("FastRequestUser",), "django": ()}
DEFAULT_MASTER_PORT = 5557  # Locust's own default: plain `locust --worker` finds it


class LocustOptions(Model):
    """The driver's own settings (``--locustfile``, ``--locust-processes``...), stored
    with the experiment as its ``driver_options``."""

    # A path, or a built-in scenario's name (SCENARIOS); None: "request".
    locustfile: str | None = None
    # User classes to run (Locust's positional arguments); empty: every class in the file,
    # or the built-in scenario's default.
    users: tuple[str, ...] = ()
    processes: Annotated[int, Field(ge=1, le=64)] = 1
    # Workers on other machines the master waits for (0: none, a single Locust or
    # --processes), and how long.
    expect_workers: Annotated[int, Field(ge=0, le=1000)] = 0
    workers_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    # Where the master listens for workers on other machines (the --listen address).
    master_bind: str = "127.0.0.1"
    master_port: Annotated[int, Field(ge=1, le=65535)] = DEFAULT_MASTER_PORT

    @field_validator("master_bind")
    @classmethod
    def _ip(cls, value: str) -> str:
        ipaddress.ip_address(value)
        return value

    @property
    def scenario(self) -> str:
        """The built-in scenario's name, or "" for the user's own file."""
        name = self.locustfile or DEFAULT_SCENARIO
        return name if name in SCENARIOS else ""


def scenario_path(name: str) -> Path:
    """A built-in scenario (or the hooks) as a file Locust can open."""
    resource = resources.files("servelab.load.locustfiles").joinpath(name)
    if isinstance(resource, Path):
        return resource
    with resources.as_file(resource) as path:  # zipped install: a temporary copy
        return Path(path)


def request_json(request: RequestSpec, load: LoadSpec) -> str:
    """The workload's request for the built-in scenario (``--servelab-request``)."""
    return json.dumps(
        {
            "method": request.method,
            "path": request.path,
            "headers": request.headers,
            "body": request.body,
            "content_type": request.content_type,
            "mix": [[m.path, m.weight] for m in request.mix],
            "expect_status": request.expect_status,
            "keepalive": load.keepalive,
            "timeout_s": load.timeout_s,
        },
        separators=(",", ":"),
    )


# After the replay's last due request, how long its run goes on (Users still sending
# late requests; those in flight at the stop are then waited for, --stop-timeout).
REPLAY_TAIL_S = 1.0


def replay_arguments(load: LoadSpec, workdir: Path) -> list[str]:
    """The built-in scenario's replay (``locustfiles/replay_user.py``): the schedule
    servelab wrote, its speed, the part of it sent (a warm-up's first seconds), where the
    master writes each request down (a record left by an earlier run there removed: a
    master that writes none must not be read as this run's), and the run's length: the
    schedule's at its speed."""
    assert load.schedule is not None  # LoadSpec's check for the replay model
    from servelab.load.replay_figures import LATENCIES_FILE, SENT_FILE
    from servelab.traffic.schedule import schedule_size

    for earlier in (SENT_FILE, LATENCIES_FILE):
        (workdir / earlier).unlink(missing_ok=True)
    seconds = schedule_size(Path(load.schedule)).duration_s / load.speed
    if load.duration_s is not None:
        seconds = min(seconds, load.duration_s)
    return [
        "--servelab-run-time", f"{seconds + REPLAY_TAIL_S:g}",
        "--servelab-replay", load.schedule, "--servelab-replay-speed", repr(float(load.speed)),
        "--servelab-replay-until", f"{load.duration_s or 0:g}",
        "--servelab-replay-sent", str(workdir / SENT_FILE),
    ]
