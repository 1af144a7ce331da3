"""nginx as the reverse proxy of a stack: config rendering, check, command line.

The config follows the seeds' full nginx config but keeps everything (pid,
error log, temp paths) inside the stack's private directory, runs in the
foreground (``daemon off``) so servelab owns the master process, and listens
on loopback only.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from servelab.config.stack import ProxySpec, StackSpec
from servelab.errors import ServelabError, StackStartError
from servelab.host.doctor import SETUP_FIX, Check, check_program
from servelab.host.facts import program_version
from servelab.host.paths import require_program
from servelab.host.templates import render
from servelab.observe.attribution import ACCESS_LOG_NAME, classify_by_rules
from servelab.plugins.front import (
    LOOPBACK,
    AppAddress,
    Configured,
    Front,
    FrontDeploy,
    FrontTarget,
    host_port,
)

CONF_NAME = "nginx.conf"
LOG_NAME = "nginx.log"
BINARY = "/usr/sbin/nginx"  # Debian's, named in exported units
CHECK_TIMEOUT_S = 60.0
_USER_LINE = re.compile(r"^(\s*)user\s+([^;\s]+)[^;]*;", re.MULTILINE)
_LISTEN_LINE = re.compile(r"^(\s*)listen\s+[^;]+;", re.MULTILINE)
_TEMP_DIRS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
# nginx: "2026/11/22 00:31:04 [error] 29672#29672: *267 message"
_NGINX_LINE = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[(?P<level>\w+)\] [^:]*: (?P<msg>.*)$")
# (pattern on the message, class), first match wins.
_NGINX_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"connect\(\) to .* failed \(11: "), "backlog_overflow"),
    (re.compile(r"upstream timed out .* while connecting to upstream"), "connect_timeout"),
    (re.compile(r"upstream timed out"), "read_timeout"),
    (re.compile(r"upstream prematurely closed connection"), "upstream_closed"),
    (re.compile(r"reset by peer|\(32: Broken pipe\)"), "upstream_reset"),
    (re.compile(r"\((111|2): [^)]*\) while connecting to upstream"), "upstream_refused"),
    (re.compile(r"no live upstreams"), "upstream_refused"),
    (re.compile(r"worker_connections are not enough|\(24: Too many open files\)"), "proxy_limit"),
)


def nginx_binary() -> str:
    return require_program("nginx", "servelab setup (or apt-get install nginx-light)")


def upstream_address(transport: str, *, port: int | None = None, socket: Path | None = None) -> str:
    """What follows ``server`` in the upstream block: ``127.0.0.1:PORT`` or ``unix:PATH``."""
    if transport == "unix":
        if socket is None:
            raise ValueError("a unix upstream needs a socket path")
        return f"unix:{socket}"
    if port is None:
        raise ValueError("a tcp upstream needs a port")
    return f"127.0.0.1:{port}"


@dataclass(frozen=True)
class NginxDeploy:
    """Where an exported nginx.conf (``servelab export``) puts things on the target machine,
    instead of a private temp dir."""

    listen: str  # what follows ``listen``: "80", "0.0.0.0:8080"
    user: str  # the workers' user; a member of the app socket's group
    pid_path: Path
    temp_dir: Path  # client_body, proxy... temp dirs go under it
    error_log: str = "stderr"  # under systemd: the journal
    source: str = "a servelab result"  # named in the header comment


def render_nginx_conf(
    proxy: ProxySpec,
    *,
    workdir: Path | None = None,
    listen_port: int | None = None,
    listen_host: str = LOOPBACK,
    upstream: str,
    stack_name: str = "stack",
    run_as_root: bool | None = None,
    deploy: NginxDeploy | None = None,
) -> str:
    """The nginx.conf text; ``upstream`` as returned by :func:`upstream_address`.

    Measuring: everything in ``workdir``, listening on 127.0.0.1:``listen_port``.
    With ``deploy``: the same config for a real machine, with its paths and listen address.
    """
    if run_as_root is None:
        run_as_root = os.geteuid() == 0
    if deploy is not None:
        places = {
            "workdir": None,
            "pid_path": deploy.pid_path,
            "temp_dir": deploy.temp_dir,
            "listen": deploy.listen,
            "error_log": deploy.error_log,
            "access_log": None,  # a measuring instrument, not part of what is exported
        }
    elif workdir is None or listen_port is None:
        raise ValueError("give workdir and listen_port, or deploy")
    else:
        places = {
            "workdir": workdir,
            "pid_path": workdir / "nginx.pid",
            "temp_dir": workdir / "tmp",
            "listen": host_port(listen_host, listen_port),
            "error_log": workdir / LOG_NAME,
            "access_log": workdir / ACCESS_LOG_NAME if proxy.access_log else None,
        }
    return render(
        "nginx.conf.j2",
        proxy=proxy,
        upstream=upstream,
        stack_name=stack_name,
        run_as_root=run_as_root,
        deploy=deploy,
        **places,
    )


def write_nginx_conf(
    proxy: ProxySpec,
    *,
    workdir: Path,
    listen_port: int,
    upstream: str,
    stack_name: str = "stack",
    listen_host: str = LOOPBACK,
) -> Path:
    """Render nginx.conf into ``workdir`` and create the temp dirs it names."""
    for name in _TEMP_DIRS:
        (workdir / "tmp" / name).mkdir(parents=True, exist_ok=True)
    conf = workdir / CONF_NAME
    conf.write_text(
        render_nginx_conf(
            proxy, workdir=workdir, listen_port=listen_port, upstream=upstream,
            stack_name=stack_name, listen_host=listen_host,
        )
    )
    return conf


def nginx_command(conf_path: Path, *, test: bool = False) -> list[str]:
    """argv to run (or with ``test``, to check) nginx on ``conf_path`` in the foreground.

    ``-e`` sends the errors nginx logs before reading its config to the same
    log, instead of the system-wide one (which may not be writable).
    """
    workdir = conf_path.parent
    argv = [nginx_binary()]
    if test:
        argv += ["-t", "-q"]
    return [*argv, "-p", f"{workdir}/", "-c", str(conf_path), "-e", str(workdir / LOG_NAME)]


def nginx_check(conf_path: Path, *, timeout_s: float = 30.0) -> None:
    """Run ``nginx -t`` on ``conf_path``; StackStartError with nginx's message if it fails."""
    argv = nginx_command(conf_path, test=True)
    log = conf_path.parent / LOG_NAME
    start = log.stat().st_size if log.exists() else 0
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise StackStartError(f"nginx -t on {conf_path} took more than {timeout_s:g} s") from None
    if done.returncode == 0:
        return
    logged = ""
    if log.exists():
        with open(log, errors="replace") as handle:
            handle.seek(start)
            logged = handle.read()
    # nginx prints to stderr and also logs to the error log; show one of them.
    output = (done.stderr + done.stdout).strip() or logged.strip()
    raise StackStartError(
        f"nginx rejected the config {conf_path}: {_first_problem(output)}",
        "this is a servelab bug unless a knob value is out of nginx's range; "
        "see the config and nginx's message",
        detail=output,
    )


def _staged_user(match: re.Match[str], for_boot: bool) -> str:
    """The ``user`` line of a staged nginx.conf: booted, workers that can reach the staged
    socket (root as root, else none); checked, the exported user if it exists here."""
    indent, user = match.group(1), match.group(2)
    if for_boot:
        return f"{indent}user root;" if os.geteuid() == 0 else f"{indent}# user {user}; (staged)"
    try:
        pwd.getpwnam(user)
    except KeyError:
        return f"{indent}# user {user}; (no such user on this machine)"
    return match.group(0)


def _first_problem(output: str) -> str:
    for line in output.splitlines():
        if "[emerg]" in line or "[alert]" in line or "[crit]" in line:
            return line.split("] ", 1)[-1].strip()
    lines = output.strip().splitlines()
    return lines[0] if lines else "no message"


class Nginx(Front):
    kind = "nginx"
    role = "nginx"
    protocols = frozenset({"http", "uwsgi", "fastcgi"})
    own_knobs = (
        "worker_processes", "worker_connections", "gzip_min_length", "buffering", "access_log"
    )
    log_name = LOG_NAME

    def describe(self, proxy: ProxySpec) -> str:
        return "nginx"

    def configure(
        self, spec: StackSpec, *, workdir: Path, listen_port: int, app_address: AppAddress,
        listen_host: str = LOOPBACK,
    ) -> Configured:
        if isinstance(app_address, Path):
            upstream = upstream_address("unix", socket=app_address)
        else:
            upstream = upstream_address("tcp", port=app_address[1])
        conf = write_nginx_conf(
            spec.proxy, workdir=workdir, listen_port=listen_port, upstream=upstream,
            stack_name=spec.name, listen_host=listen_host,
        )
        nginx_check(conf)  # before anything runs
        return Configured(conf)

    def command(self, conf: Path) -> list[str]:
        return nginx_command(conf)

    conf_name = CONF_NAME
    timeout_setting = "proxy_connect/read/send_timeout"
    pool_idle_setting = "upstream keepalive_timeout"

    def deploy(self, stack: StackSpec, target: FrontTarget) -> FrontDeploy:
        """nginx.conf from the measuring template in its deploy mode, and its unit's lines."""
        if target.upstream is None:
            raise ValueError("nginx runs no app itself")
        if isinstance(target.upstream, Path):
            upstream = upstream_address("unix", socket=target.upstream)
        else:
            upstream = upstream_address("tcp", port=target.upstream[1])
        conf = render_nginx_conf(
            stack.proxy,
            upstream=upstream,
            stack_name=stack.name,
            deploy=NginxDeploy(
                listen=target.listen,
                user=target.user,
                pid_path=target.run_dir / "nginx.pid",
                temp_dir=target.state_dir,
                source=target.source,
            ),
        )
        path = str(target.conf_dir / CONF_NAME)
        proxy = stack.proxy
        pool = (
            f"{proxy.upstream_keepalive} idle connections per nginx worker "
            "(`proxy_http_version 1.1` and an empty `Connection` header, as in seed keepalive.md)"
            if proxy.upstream_keepalive
            else "off"
        )
        return FrontDeploy(
            files={CONF_NAME: conf},
            file_roles={
                CONF_NAME: f"nginx: upstream + server blocks, listening on `{target.listen}`"
            },
            exec_start=[BINARY, "-c", path],
            check=[BINARY, "-t", "-q", "-c", path],
            check_name="nginx -t",
            distro_unit="nginx",
            apt_packages=("nginx-light",),
            reload_signal="HUP",
            stop_signal="SIGQUIT",
            stop_comment="SIGQUIT: finish the requests in flight, then exit.",
            # Two descriptors per proxied connection.
            nofile=max(8192, 2 * proxy.worker_connections * proxy.worker_processes + 1024),
            pool=pool,
            pool_idle="`keepalive_timeout` in the upstream block",
        )

    def stage_deploy(self, conf: str, *, listen_port: int, for_boot: bool) -> str:
        conf = _LISTEN_LINE.sub(rf"\g<1>listen 127.0.0.1:{listen_port};", conf)
        return _USER_LINE.sub(lambda m: _staged_user(m, for_boot), conf)

    def check_deploy(self, conf: Path) -> str:
        try:
            nginx_check(conf, timeout_s=CHECK_TIMEOUT_S)
        except StackStartError as exc:
            raise ServelabError(
                f"the exported {CONF_NAME} fails nginx -t: {exc.problem.split(': ', 1)[-1]}",
                "this is a servelab bug unless a knob is out of nginx's range; see nginx's "
                "message",
                detail=exc.detail,
            ) from None
        return f"nginx -t accepts {CONF_NAME}"

    def classify_log_line(self, line: str) -> str | None:
        match = _NGINX_LINE.match(line)
        return None if match is None else classify_by_rules(match, _NGINX_RULES)

    def is_log_line(self, line: str) -> bool:
        return _NGINX_LINE.match(line) is not None

    def version(self) -> str | None:
        return program_version(["nginx", "-v"])

    def doctor_checks(self) -> list[Check]:
        return [
            check_program(
                "nginx", ["nginx", "-v"], required=True,
                fix=f"apt-get install nginx-light, or {SETUP_FIX}",
            )
        ]
