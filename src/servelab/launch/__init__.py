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

from servelab.apps import _SERVELAB_ROOT, ResolvedApp, app_environment, resolve_app
from servelab.config.load import RequestSpec
from servelab.config.stack import StackSpec
from servelab.fronts import apache, nginx
from servelab.host.cgroups import CpuGroup
from servelab.host.netns import Placement, place_stack
from servelab.host.procs import JANITOR, ManagedProcess, free_port
from servelab.launch.readiness import wait_listening, wait_ready
from servelab.launch.running import RunningStack
from servelab.servers import granian, gunicorn, hypercorn, uvicorn, uwsgi

__all__ = ["OWNER_ENV", "RunningStack", "launch_stack"]

# Set in every server's environment to the pid of the process that launched it,
# so tests (and people) can tell which processes belong to whom.
OWNER_ENV = "SERVELAB_OWNER_PID"
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
) -> Iterator[RunningStack]:
    """Run ``spec`` until the ``with`` block ends; yields it once ``probe`` succeeds.

    ``cpus`` (a taskset CPU list) pins every process of the stack; ``quota`` caps
    their CPU time together (a cgroup, see servelab.host.cgroups). Raises
    SpecError for an unusable app or knob combination, StackStartError when a
    server fails to start or to answer ``probe`` within ``startup_timeout_s``.
    With ``spec.network.somaxconn`` set the stack runs in a private network
    namespace (``stack.placement``), removed after the stack has stopped.
    """
    with (
        place_stack(spec.network.somaxconn, spec.network.namespace) as on_network,
        _launch(
            _placed(spec, on_network), replace(on_network, quota=quota), probe, cpus,
            startup_timeout_s,
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
) -> Iterator[RunningStack]:
    netns = placement.namespace
    app = resolve_app(spec.app)
    if spec.server.kind == "gunicorn":
        gunicorn.check_worker_class(spec.server, app)
    elif spec.server.kind == "uwsgi":
        uwsgi.check_app(app)
    elif spec.server.kind == "mod_wsgi":
        apache.check_app(app)
    workdir = _make_workdir()
    JANITOR.watch("path", workdir)
    processes: dict[str, ManagedProcess] = {}
    deadline = time.monotonic() + startup_timeout_s
    try:
        if spec.server.kind == "mod_wsgi":
            with _launch_mod_wsgi(spec, app, workdir, placement, probe, cpus, deadline) as stack:
                processes = stack.processes
                yield stack
            return
        app_proc, app_address, upstream = _prepare_app_server(
            spec, app, workdir, cpus, placement
        )
        app_port = app_address[1] if isinstance(app_address, tuple) else None
        if spec.proxy.kind != "none":
            listen_port = _free_port_other_than(app_port, placement)
        if spec.proxy.kind == "apache":
            who = apache.run_as()
            apache.open_to(workdir, who, 0o710)
            target = apache.proxy_target(
                spec.proxy.protocol,
                port=app_port,
                socket=app_address if isinstance(app_address, Path) else None,
            )
            conf = apache.write_httpd_conf(
                spec, workdir=workdir, listen_port=listen_port, target=target, who=who
            )
            apache.apache_check(conf)  # before anything runs
            front_url = f"http://127.0.0.1:{listen_port}"
        elif spec.proxy.kind == "nginx":
            conf = nginx.write_nginx_conf(
                spec.proxy, workdir=workdir, listen_port=listen_port, upstream=upstream,
                stack_name=spec.name,
            )
            nginx.nginx_check(conf)  # before anything runs
            front_url = f"http://127.0.0.1:{listen_port}"
        else:
            assert isinstance(app_address, tuple), "a unix socket is only allowed behind a proxy"
            front_url = "http://{}:{}".format(*app_address)
        processes["app"] = app_proc.start()
        # nginx starts only once the app listens, so its error log holds no
        # start-up noise ("connect() failed") that a run's log analysis would count.
        wait_listening(app_address, processes, _left(deadline), netns=netns)
        if spec.proxy.kind == "nginx":
            processes["nginx"] = ManagedProcess(
                "nginx",
                placement.wrap(nginx.nginx_command(conf)),
                log_path=workdir / nginx.LOG_NAME,
                cwd=workdir,
                env={**os.environ, OWNER_ENV: str(os.getpid())},
                cpus=cpus,
            ).start()
        elif spec.proxy.kind == "apache":
            if isinstance(app_address, Path):
                # Connectable by Apache's children (their group) only, whatever mode the
                # app server gave it (gunicorn: 0777; uWSGI: 0755, which they cannot use).
                apache.open_to(app_address, who, 0o660)
            processes["apache"] = _apache_process(conf, workdir, placement, cpus, os.environ)
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
def _launch_mod_wsgi(
    spec: StackSpec,
    app: ResolvedApp,
    workdir: Path,
    placement: Placement,
    probe: RequestSpec,
    cpus: str | None,
    deadline: float,
) -> Iterator[RunningStack]:
    """Apache alone, running the app in mod_wsgi daemon processes (role "apache"; the
    sampler gives the daemons role "app"). The caller stops the processes."""
    who = apache.run_as()
    python_path = [p for p in (app.app_dir, _SERVELAB_ROOT) if p is not None]
    apache.check_daemon_access(who, [*apache.python_paths(), *python_path])
    env = app_environment(spec.app.env, app.app_dir)
    env["PYTHONUNBUFFERED"] = "1"
    apache.open_to(workdir, who, 0o710)
    apache.open_database(env, who)
    listen_port = _free_port(placement)
    conf = apache.write_httpd_conf(
        spec, workdir=workdir, listen_port=listen_port, app=app, python_path=python_path,
        who=who,
    )
    apache.apache_check(conf)
    processes = {"apache": _apache_process(conf, workdir, placement, cpus, env)}
    stack = RunningStack(
        spec=spec, base_url=f"http://127.0.0.1:{listen_port}", workdir=workdir,
        processes=processes, placement=placement, app_address=None,
    )
    try:
        wait_ready(
            stack.url(probe.path), probe, processes, _left(deadline), netns=placement.namespace
        )
        # Requests wait for a daemon in the listen queue of mod_wsgi's socket.
        sockets = sorted(workdir.glob("wsgi.*.sock"))
        stack.app_address = sockets[0] if sockets else None
        yield stack
    finally:
        _stop_all(processes)


def _apache_process(
    conf: Path, workdir: Path, placement: Placement, cpus: str | None, env: Mapping[str, str]
) -> ManagedProcess:
    return ManagedProcess(
        "apache",
        placement.wrap(apache.apache_command(conf)),
        log_path=workdir / apache.LOG_NAME,
        cwd=workdir,
        env={**env, OWNER_ENV: str(os.getpid())},
        cpus=cpus,
    ).start()


def _prepare_app_server(
    spec: StackSpec, app: ResolvedApp, workdir: Path, cpus: str | None, placement: Placement
) -> tuple[ManagedProcess, tuple[str, int] | Path, str]:
    """The (not yet started) app server, where it listens ((host, port) or a unix
    socket path), and the nginx upstream address pointing there."""
    socket: Path | None = None
    port: int | None = None
    address: tuple[str, int] | Path
    if spec.proxy.kind in ("nginx", "apache") and spec.proxy.transport == "unix":
        socket = address = workdir / SOCKET_NAME
        upstream = nginx.upstream_address("unix", socket=socket)
    else:
        port = _free_port(placement)
        address = ("127.0.0.1", port)
        upstream = nginx.upstream_address("tcp", port=port)
    if spec.server.kind == "gunicorn":
        conf = gunicorn.write_gunicorn_conf(
            spec.server, workdir=workdir, bind=gunicorn.bind_address(port=port, socket=socket),
            stack_name=spec.name,
        )
        argv = gunicorn.gunicorn_command(conf, app)
        log_path = workdir / gunicorn.LOG_NAME
    elif spec.server.kind == "uvicorn":
        argv = uvicorn.uvicorn_command(spec.server, app, port=port, socket=socket)
        log_path = workdir / uvicorn.LOG_NAME
    elif spec.server.kind == "granian":
        argv = granian.granian_command(spec.server, app, port=port, socket=socket)
        log_path = workdir / granian.LOG_NAME
    elif spec.server.kind == "hypercorn":
        argv = hypercorn.hypercorn_command(spec.server, app, port=port, socket=socket)
        log_path = workdir / hypercorn.LOG_NAME
    else:
        # uWSGI refuses a backlog above somaxconn where it runs; others are capped silently.
        in_netns = placement.namespace is not None
        cap = spec.network.somaxconn if in_netns else uwsgi.somaxconn()
        argv = uwsgi.uwsgi_command(
            spec.server, app, protocol=spec.proxy.protocol, port=port, socket=socket,
            max_backlog=cap,
        )
        log_path = workdir / uwsgi.LOG_NAME
    env = app_environment(spec.app.env, app.app_dir)
    env["PYTHONUNBUFFERED"] = "1"  # log lines reach the log file (and its tail) at once
    env[OWNER_ENV] = str(os.getpid())
    proc = ManagedProcess(
        spec.server.kind, placement.wrap(argv), log_path=log_path, cwd=app.app_dir, env=env,
        cpus=cpus,
    )
    return proc, address, upstream


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
