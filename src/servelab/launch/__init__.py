"""Launch a whole stack (app server, then nginx or Apache) in a private temp dir; always clean up.

``launch_stack`` is the only way the rest of servelab starts servers: it
checks everything it can before starting anything (the app imports, the
worker class fits it, ``nginx -t`` accepts the config), starts the servers
in their own process groups, proves readiness with the workload's real
request, and on the way out (normal exit, exception, Ctrl-C, or a failed
start) stops every process and removes the temp dir.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from servelab.apps import ResolvedApp, app_environment, resolve_app
from servelab.config.load import RequestSpec
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.host.cgroups import CpuGroup
from servelab.host.netns import Placement, place_stack
from servelab.host.procs import JANITOR, OWNER_ENV, ManagedProcess, free_port
from servelab.host.readiness import wait_listening, wait_ready
from servelab.host.running import RunningStack
from servelab.launch.app_python import check_app_servers
from servelab.plugins.front import LOOPBACK, Configured, Front, get_front, host_port
from servelab.plugins.server import AppServer, Listen, get_server

__all__ = ["OWNER_ENV", "RunningStack", "launch_stack", "launched_by"]



def launched_by(pid: int) -> list[int]:
    """Live processes that servelab process ``pid`` started (directly or not): they carry
    its marker in their environment, so other people's servers do not count."""
    marker = f"{OWNER_ENV}={pid}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
SOCKET_NAME = "app.sock"
_MAX_SOCKET_PATH = 107  # sun_path is 108 bytes including the final NUL


@contextmanager
def launch_stack(
    spec: StackSpec,
    *,
    probe: RequestSpec,
    cpus: str | None = None,
    quota: CpuGroup | None = None,
    startup_timeout_s: float = 30.0,
    listen_host: str = LOOPBACK,
) -> Iterator[RunningStack]:
    """Run ``spec`` until the ``with`` block ends; yields it once ``probe`` succeeds.

    ``cpus`` (a taskset CPU list) pins every process of the stack; ``quota`` caps
    their CPU time together (a cgroup, see servelab.host.cgroups). Raises
    SpecError for an unusable app or knob combination, StackStartError when a
    server fails to start or to answer ``probe`` within ``startup_timeout_s``.
    With ``spec.network.somaxconn`` set the stack runs in a private network
    namespace (``stack.placement``), removed after the stack has stopped.
    ``listen_host``: the address the front listens on (load workers on other machines).
    """
    if listen_host != LOOPBACK and get_front(spec.proxy.kind).role is None:
        raise SpecError(
            f"--listen {listen_host}: stack {spec.name!r} has no front, and app servers "
            "listen on loopback only",
            "put nginx or Apache in front, or leave --listen out",
        )
    with (
        place_stack(spec.network.somaxconn, spec.network.namespace) as on_network,
        _launch(
            _placed(spec, on_network), replace(on_network, quota=quota), probe, cpus,
            startup_timeout_s, listen_host,
        ) as stack,
    ):
        yield stack


def _placed(spec: StackSpec, placement: Placement) -> StackSpec:
    """``spec`` with the app's backlog capped when somaxconn is emulated (no namespace)."""
    cap = placement.backlog_cap
    if cap is None or spec.server.backlog <= cap:
        return spec
    return spec.model_copy(update={"server": spec.server.model_copy(update={"backlog": cap})})


@contextmanager
def _launch(
    spec: StackSpec,
    placement: Placement,
    probe: RequestSpec,
    cpus: str | None,
    startup_timeout_s: float,
    listen_host: str = LOOPBACK,
) -> Iterator[RunningStack]:
    netns = placement.namespace
    app = resolve_app(spec.app)
    server: AppServer = get_server(spec.server.kind)
    front: Front = get_front(spec.proxy.kind)
    server.check_app(spec.server, app)
    check_app_servers([spec])  # installed in the app's Python (asked once per Python)
    workdir = _make_workdir()
    JANITOR.watch("path", workdir)
    processes: dict[str, ManagedProcess] = {}
    deadline = time.monotonic() + startup_timeout_s
    try:
        if server.inside_front is not None:
            hosted = server.hosting(spec.server, app, workdir)
            with _launch_hosted(
                spec, front, app, hosted, workdir, placement, probe, cpus, deadline,
                listen_host,
            ) as stack:
                processes = stack.processes
                yield stack
            return
        app_proc, app_address = _prepare_app_server(spec, server, app, workdir, cpus, placement)
        app_port = app_address[1] if isinstance(app_address, tuple) else None
        if front.role is not None:
            listen_port = _free_port_other_than(app_port, placement)
            configured = front.configure(
                spec, workdir=workdir, listen_port=listen_port, app_address=app_address,
                listen_host=listen_host,
            )
            front_url = f"http://{host_port(listen_host, listen_port)}"
        else:
            assert isinstance(app_address, tuple), "a unix socket is only allowed behind a proxy"
            front_url = "http://{}:{}".format(*app_address)
        processes["app"] = app_proc.start()
        # The front starts only once the app listens, so its error log holds no
        # start-up noise ("connect() failed") that a run's log analysis would count.
        wait_listening(app_address, processes, _left(deadline), netns=netns)
        if front.role is not None:
            front.before_start(app_address, workdir)
            processes[front.role] = _front_process(
                front, configured, workdir, placement, cpus
            )
        wait_ready(front_url + probe.path, probe, processes, _left(deadline), netns=netns)
        yield RunningStack(
            spec=spec, base_url=front_url, workdir=workdir, processes=processes,
            placement=placement, app_address=app_address,
        )
    finally:
        try:
            _stop_all(processes)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            JANITOR.forget("path", workdir)


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


@contextmanager
def _launch_hosted(
    spec: StackSpec,
    front: Front,
    app: ResolvedApp,
    hosted: Mapping[str, object],
    workdir: Path,
    placement: Placement,
    probe: RequestSpec,
    cpus: str | None,
    deadline: float,
    listen_host: str = LOOPBACK,
) -> Iterator[RunningStack]:
    """The front alone, running the app itself as its server says (``hosted``: a server
    ``inside_front``, mod_wsgi in Apache). The caller stops the processes."""
    listen_port = _free_port(placement)
    configured = front.configure_hosting(
        spec, app, hosted, workdir=workdir, listen_port=listen_port, listen_host=listen_host
    )
    assert front.role is not None
    processes = {front.role: _front_process(front, configured, workdir, placement, cpus)}
    stack = RunningStack(
        spec=spec, base_url=f"http://{host_port(listen_host, listen_port)}", workdir=workdir,
        processes=processes, placement=placement, app_address=None,
    )
    try:
        wait_ready(
            stack.url(probe.path), probe, processes, _left(deadline), netns=placement.namespace
        )
        stack.app_address = front.hosted_app_address(workdir)
        yield stack
    finally:
        _stop_all(processes)


def _front_process(
    front: Front, configured: Configured, workdir: Path, placement: Placement,
    cpus: str | None,
) -> ManagedProcess:
    assert front.role is not None
    env = os.environ if configured.env is None else configured.env
    return ManagedProcess(
        front.role,
        placement.wrap(front.command(configured.conf)),
        log_path=workdir / front.log_name,
        cwd=workdir,
        env={**env, OWNER_ENV: str(os.getpid())},
        cpus=cpus,
    ).start()


def _prepare_app_server(
    spec: StackSpec, server: AppServer, app: ResolvedApp, workdir: Path, cpus: str | None,
    placement: Placement,
) -> tuple[ManagedProcess, tuple[str, int] | Path]:
    """The (not yet started) app server, and where it listens ((host, port) or a unix
    socket path)."""
    address: tuple[str, int] | Path
    # somaxconn where it runs, for a server that refuses a larger backlog (uWSGI).
    max_backlog = spec.network.somaxconn if placement.namespace is not None else None
    if spec.proxy.transport == "unix" and get_front(spec.proxy.kind).role is not None:
        address = workdir / SOCKET_NAME
        listen = Listen(socket=address, protocol=spec.proxy.protocol, max_backlog=max_backlog)
    else:
        port = _free_port(placement)
        address = ("127.0.0.1", port)
        listen = Listen(port=port, protocol=spec.proxy.protocol, max_backlog=max_backlog)
    command = server.command(spec.server, app, listen, workdir, stack_name=spec.name)
    env = app_environment(spec.app.env, app.app_dir, app.python)
    env["PYTHONUNBUFFERED"] = "1"  # log lines reach the log file (and its tail) at once
    env[OWNER_ENV] = str(os.getpid())
    proc = ManagedProcess(
        spec.server.kind, placement.wrap(command.argv), log_path=workdir / command.log_name,
        cwd=app.app_dir, env=env, cpus=cpus,
    )
    return proc, address


def _free_port(placement: Placement) -> int:
    """A free port where the stack runs (inside its namespace, if it has one)."""
    if placement.namespace is None:
        return free_port()
    return placement.namespace.call(free_port)


def _free_port_other_than(taken: int | None, placement: Placement) -> int:
    """A free port; the kernel may hand back a port it just gave us, so ask again."""
    for _ in range(20):
        port = _free_port(placement)
        if port != taken:
            return port
    return port


def _make_workdir() -> Path:
    """A new private dir, short enough for a unix socket path inside it."""
    workdir = Path(tempfile.mkdtemp(prefix="servelab-"))
    if len(os.fsencode(workdir / SOCKET_NAME)) > _MAX_SOCKET_PATH:
        workdir.rmdir()
        workdir = Path(tempfile.mkdtemp(prefix="servelab-", dir="/tmp"))
    return workdir


def _stop_all(processes: dict[str, ManagedProcess]) -> None:
    """Stop in reverse start order (nginx before the app); every one, even if one fails."""
    failure: BaseException | None = None
    for proc in reversed(list(processes.values())):
        try:
            proc.stop()
        except BaseException as exc:  # includes a second Ctrl-C: keep stopping the rest
            failure = failure or exc
    if failure is not None:
        raise failure
