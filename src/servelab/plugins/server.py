"""What every app server module provides, so the rest of servelab never names one.

A server module defines one ``AppServer`` subclass and is listed once in
``servelab.registry``; spec validation, the launcher, ``servelab doctor``,
the environment record and the CLI's choices read it from there.
"""

from __future__ import annotations

import re
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from servelab.apps import ResolvedApp
from servelab.config.stack import ServerSpec, StackSpec
from servelab.errors import ServelabError, SpecError
from servelab.host.doctor import Check, package_check
from servelab.host.facts import package_version
from servelab.registry import SERVERS

CHECK_TIMEOUT_S = 60.0  # a server's own check of its exported config may import the app

# ServerSpec knobs that only some servers have; each server lists the ones it honours.
OPTIONAL_KNOBS = ("threads", "blocking_threads", "worker_class", "max_requests",
                  "max_requests_jitter")


@dataclass(frozen=True)
class Listen:
    """Where and how an app server listens: a loopback port or a unix socket."""

    port: int | None = None
    socket: Path | None = None
    protocol: str = "http"  # what the front speaks to it (see ``AppServer.protocols``)
    max_backlog: int | None = None  # net.core.somaxconn where it runs, when known

    def __post_init__(self) -> None:
        if (self.port is None) == (self.socket is None):
            raise ValueError("give a port or a socket path")


@dataclass(frozen=True)
class Command:
    """The argv that runs a server, and the log file it writes (in the stack's dir)."""

    argv: list[str]
    log_name: str


@dataclass(frozen=True)
class DeployTarget:
    """Where a deployed app server runs on the target machine (``servelab export``)."""

    app: str  # the app as measured: "package.module:attr", a factory as measured too
    name: str  # the deployment's name (process title)
    socket: Path | None  # where it listens: a unix socket, or 127.0.0.1:port
    port: int | None
    venv: Path
    conf_dir: Path  # where its config files go
    app_dir: Path
    graceful_timeout_s: int
    socket_umask: int | None  # for a unix socket: only owner and group may connect
    socket_group: str | None  # the group that may connect to the socket (the front in it)
    source: str  # named in the files' header comments
    front: str = "the front"  # its title ("nginx", "Apache")
    front_timeout: str = "its timeouts"  # the front's setting that bounds a request

    def front_waits(self, seconds: int) -> str:
        """How long the front waits for the app: "nginx waits 65 s (`proxy_...`)"."""
        return f"{self.front} waits {seconds} s ({self.front_timeout})"


@dataclass(frozen=True)
class ServerDeploy:
    """A server's part of a deployable set, and what the README says about it."""

    exec_start: list[str]  # the systemd unit's command line
    summary: str  # "gunicorn with the `gthread` worker, 2 workers × 4 threads"
    timeout: str  # how long a request may run, and who ends it
    packages: tuple[str, ...]  # what to pip install into the target's venv
    files: dict[str, str] = field(default_factory=dict)  # config files for conf_dir
    file_roles: dict[str, str] = field(default_factory=dict)  # file -> what it is (README)
    notify: bool = False  # tells systemd it is ready (sd_notify: Type=notify)
    app_named_in: str = "the unit's `ExecStart`"
    umask_also_in: str = ""  # where, besides the unit, the socket's umask is set
    notes: tuple[str, ...] = ()
    # A server that runs inside its front (``inside_front``): no unit of its own
    # (``exec_start`` empty), and what the front's config says about the app
    # (``Front.deploy`` reads it from ``FrontTarget.hosted``).
    hosted: Mapping[str, object] | None = None


def deploy_argv(
    argv: list[str], interpreter: str, target: DeployTarget, values: Mapping[str, str]
) -> list[str]:
    """A measured command line (``[interpreter, "-m", server, ...]``) for the target
    machine: run by the target venv's Python, each flag of ``values`` given its value there
    (where the command has the flag)."""
    if argv[0] != interpreter:
        raise AssertionError("the server's command no longer starts with the interpreter")
    argv = [str(target.venv / "bin" / "python"), *argv[1:]]
    for flag, value in values.items():
        if flag in argv:
            argv[argv.index(flag) + 1] = value
    return argv


def run_check(
    argv: list[str], cwd: Path, env: Mapping[str, str], what: str, failure: str
) -> None:
    """Run a server's own check of its exported config (``check_deploy``); ServelabError
    "``failure``: its last line" when it fails, or "``what`` took more than..."."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", cwd=cwd, env=dict(env),
            stdin=subprocess.DEVNULL, timeout=CHECK_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise ServelabError(
            f"{what} took more than {CHECK_TIMEOUT_S:g} s", "check that the app imports quickly"
        ) from None
    if done.returncode != 0:
        output = (done.stderr + done.stdout).strip()
        last = output.splitlines()[-1] if output else f"exit code {done.returncode}"
        raise ServelabError(
            f"{failure}: {last}",
            f"if the app is not installed here, pass --no-check; else see {what}'s output",
        )


class AppServer(ABC):
    """One app server: its knobs, its checks, its command line."""

    kind: ClassVar[str]
    interfaces: ClassVar[frozenset[str]] = frozenset({"asgi", "wsgi"})
    knobs: ClassVar[frozenset[str]] = frozenset()  # of OPTIONAL_KNOBS
    ignored_knobs: ClassVar[frozenset[str]] = frozenset()  # accepted, without effect
    protocols: ClassVar[frozenset[str]] = frozenset({"http"})  # a front may speak to it
    calls_factories: ClassVar[bool] = True
    # Set for a server that runs inside its front (mod_wsgi: in Apache); None: its own
    # processes, which a front (or the load driver) connects to.
    inside_front: ClassVar[str | None] = None
    # It ends a request running longer than ``timeout_s`` (the export then makes the front
    # wait longer, so that the app gives up first).
    ends_slow_requests: ClassVar[bool] = False
    # The format of its log lines, with ``level`` and ``msg`` groups (None: shares another
    # server's format); ``servelab.observe.attribution`` classifies the messages.
    log_line: ClassVar[re.Pattern[str] | None] = None
    # Distributions it needs in the app's Python ("a|b": either); the first names its
    # version.
    packages: ClassVar[tuple[str, ...]] = ()
    # The servelab extra that installs it (``pip install 'servelab[servers]'``); None: the
    # core has it.
    extra: ClassVar[str | None] = None

    def check_knobs(self, server: ServerSpec) -> None:
        """ValueError for knobs this server cannot honour (servelab.prepare.checks reports it,
        naming where)."""
        for knob in OPTIONAL_KNOBS:
            if knob in self.knobs or knob in self.ignored_knobs:
                continue
            if getattr(server, knob) != ServerSpec.model_fields[knob].default:
                raise ValueError(f"{self.kind} has no {knob} setting{_owners(knob)}")

    def check_app(self, server: ServerSpec, app: ResolvedApp) -> None:
        """SpecError when this server cannot serve ``app``."""
        if app.interface not in self.interfaces:
            other = sorted(SERVERS.where(lambda s: app.interface in s.interfaces))
            raise SpecError(
                f"app {app.import_path} is an {app.interface.upper()} app; {self.kind} serves "
                f"{' and '.join(i.upper() for i in sorted(self.interfaces))} apps only",
                f"use {', '.join(other)} for an {app.interface.upper()} app",
            )
        if app.is_factory and not self.calls_factories:
            raise SpecError(
                f"app {app.import_path} is a factory; {self.kind} cannot call it",
                f"point {self.kind} at a module-level app object",
            )

    def fit_to_app(self, server: ServerSpec, app: ResolvedApp) -> tuple[ServerSpec, str]:
        """``server`` with its settings fitted to ``app``'s interface, and what changed
        ('' when nothing): a study's stacks then serve a user's app of either kind."""
        return server, ""

    @abstractmethod
    def command(
        self, server: ServerSpec, app: ResolvedApp, listen: Listen, workdir: Path,
        stack_name: str = "stack",
    ) -> Command:
        """How to start it (it may write its config file into ``workdir`` first)."""

    def hosting(
        self, server: ServerSpec, app: ResolvedApp, workdir: Path
    ) -> Mapping[str, object]:
        """For a server ``inside_front``: what its front's config says about the app (the
        launcher hands it to ``Front.configure_hosting``, as an export hands
        ``ServerDeploy.hosted`` to ``Front.deploy``), any file it needs written into
        ``workdir`` first."""
        raise NotImplementedError(f"{self.kind} runs as its own processes")

    def deploy(self, stack: StackSpec, target: DeployTarget) -> ServerDeploy | None:
        """Its part of a deployable set (``servelab export``); None: not exportable yet."""
        return None

    @property
    def exportable(self) -> bool:
        return type(self).deploy is not AppServer.deploy

    def check_deploy(
        self, conf_dir: Path, cwd: Path, env: Mapping[str, str], python: str
    ) -> str | None:
        """Check its exported config with the server itself (in a staged copy, with the
        app's ``python``); what was checked, or None when it has nothing to check.
        ServelabError (one line: the server's own last word) when it fails."""
        return None

    def describe(self, server: ServerSpec) -> str:
        """The server part of a stack's one-line description."""
        text = f"{self.kind} workers={server.workers}"
        if "threads" in self.knobs:
            text += f" threads={server.threads}"
        if server.blocking_threads:
            text += f" blocking_threads={server.blocking_threads}"
        return text

    def needs(self, server: ServerSpec) -> tuple[str, ...]:
        """The distributions ``server`` needs in the app's Python ("a|b": either)."""
        return self.packages

    def version(self) -> str | None:
        return package_version(self.packages[0]) if self.packages else None

    def doctor_checks(self) -> list[Check]:
        """Is it installed? By default: each of its packages in servelab's Python (a
        server of an extra is optional: a warning naming the extra)."""
        return [package_check(package, self.extra) for package in self.packages]


def _owners(knob: str) -> str:
    owners = SERVERS.where(lambda server: knob in server.knobs)
    return f" ({knob} is a knob of {', '.join(owners)})" if owners else ""


def get_server(kind: str) -> AppServer:
    """The app server registered as ``kind``; SpecError naming the choices if none is."""
    found = SERVERS.get(kind)
    if not isinstance(found, AppServer):
        raise TypeError(f"{SERVERS.entries[kind]} is not a AppServer")
    return found
