"""Apache httpd as the front of a stack: mod_proxy to an app server, or mod_wsgi daemon mode.

The config (``httpd.conf.j2``) is self-contained: no Debian config is read,
every path (pid file, error log, runtime dir, mod_wsgi's sockets) is in the
stack's private directory, only the modules it needs are loaded from Debian's
``/usr/lib/apache2/modules``, and Apache listens on loopback only. It runs
in the foreground (``-DFOREGROUND``) in its own process group, so SIGTERM to
the group stops it at once (Apache's SIGTERM is "stop now", not graceful).

Users: started as root, Apache's children (and mod_wsgi's daemons, which
refuse to run as root) switch to ``www-data``. The stack's 0700 temp dir is
then handed to that group with mode 0710 (traverse only: the gunicorn socket,
which gunicorn makes world-connectable, and the WSGI script in it become
reachable; nothing can be listed), and for the Django app on SQLite its
database directory gets group rwx and the file group rw (SQLite writes a
journal beside it). mod_wsgi's daemons also need to read the project's
Python and venv: :func:`check_daemon_access` says so before starting when
they cannot (e.g. a Python under a 0700 ``/root``) and names the fix.

mod_wsgi: the PyPI build in servelab's own venv (``mod_wsgi.express``),
compiled against the project's Python; Debian's libapache2-mod-wsgi-py3
embeds Debian's /usr/bin/python3 instead.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from servelab.apps import ResolvedApp, app_environment
from servelab.config.stack import ProxySpec, StackSpec
from servelab.errors import MissingToolError, ServelabError, StackStartError
from servelab.fronts.apache_conf import (
    APACHE_THREADS_PER_CHILD,
    CONF_NAME,
    LOG_NAME,
    SCHEMES,
    ApacheDeploy,
    apache_quote,
    pool_params,
    proxy_target,
    render_httpd_conf,
    write_httpd_conf,
)
from servelab.fronts.apache_user import (
    check_daemon_access,
    open_database,
    open_to,
    python_paths,
    run_as,
)
from servelab.host.doctor import Check
from servelab.host.facts import program_version
from servelab.host.paths import find_program
from servelab.observe.attribution import SERIOUS_LEVELS
from servelab.plugins.front import (
    LOOPBACK,
    AppAddress,
    Configured,
    Front,
    FrontDeploy,
    FrontTarget,
)

FALLBACK_BINARY = Path("/usr/sbin/apache2")  # not on a non-root user's PATH on Debian
INSTALL_FIX = "servelab setup --with apache (or apt-get install apache2)"
CHECK_TIMEOUT_S = 60.0
_LISTEN_LINE = re.compile(r"^Listen\s+\S+.*$", re.MULTILINE)
_USER_LINE = re.compile(r"^(User|Group)\s+(\S+)\s*$", re.MULTILINE)
_DAEMON_USER = re.compile(r'\buser="([^"]*)" group="([^"]*)" ')
def apache_binary() -> str:
    """Debian's ``apache2`` (PATH, then /usr/sbin); MissingToolError with the fix."""
    found = find_program("apache2")
    if found:
        return found
    if os.access(FALLBACK_BINARY, os.X_OK):
        return str(FALLBACK_BINARY)
    raise MissingToolError("apache2 (Apache httpd) is not installed", INSTALL_FIX)


def apache_command(conf_path: Path, *, test: bool = False) -> list[str]:
    """argv to run (or with ``test``, to check) Apache on ``conf_path`` in the foreground."""
    if test:
        return [apache_binary(), "-t", "-f", str(conf_path)]
    return [apache_binary(), "-f", str(conf_path), "-DFOREGROUND"]


def apache_check(conf_path: Path, *, timeout_s: float = 30.0) -> None:
    """Run ``apache2 -t`` on ``conf_path``; StackStartError with Apache's message if it fails."""
    argv = apache_command(conf_path, test=True)
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout_s,
            stdin=subprocess.DEVNULL, cwd=conf_path.parent,
        )
    except subprocess.TimeoutExpired:
        raise StackStartError(f"apache2 -t on {conf_path} took more than {timeout_s:g} s") from None
    if done.returncode == 0:
        return
    output = (done.stderr + done.stdout).strip()
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    first = " ".join(lines[:2]) if lines and lines[0].endswith(":") else lines[0] if lines else ""
    raise StackStartError(
        f"apache2 rejected the config {conf_path}: {first or 'no message'}",
        "this is a servelab bug unless a knob value is out of Apache's range; "
        "see the config and Apache's message",
        detail=output,
    )



# Apache: "[Sun Nov 22 03:00:14.181226 2026] [proxy:error] [pid 9098:tid 9102] message"
_APACHE_LINE = re.compile(
    r"^\[[^\]]+\] \[(?P<module>[\w-]*):(?P<level>\w+)\] \[pid [^\]]*\] (?P<msg>.*)$"
)
_APACHE_ERRNO = re.compile(r"^\((?P<errno>\d+)\)")
_APACHE_CONNECT_ERRNO = {
    "11": "backlog_overflow", "70007": "connect_timeout", "110": "connect_timeout",
    "111": "upstream_refused", "2": "upstream_refused",
}
_APACHE_READ_ERRNO = {"70007": "read_timeout", "104": "upstream_reset"}
_WSGI_CODE = re.compile(r"\bWSGI\d{4}: ")


def classify_apache_line(line: str) -> str | None:
    """The event class of one line of Apache's error log (see the module docstring)."""
    match = _APACHE_LINE.match(line)
    if match is None:
        return None
    message, module = match["msg"], match["module"]
    errno_match = _APACHE_ERRNO.match(message)
    errno = errno_match["errno"] if errno_match else ""
    if "AH00957:" in message or "AH02454:" in message:
        return _APACHE_CONNECT_ERRNO.get(errno, "other")
    if "failed to make connection to backend" in message or "AH00898:" in message:
        return None  # the second line of a failure counted on its first
    if "AH01102:" in message:
        return _APACHE_READ_ERRNO.get(errno, "upstream_closed")
    if "AH01097:" in message:
        return "upstream_reset"
    if "reached MaxRequestWorkers" in message:  # AH00286 worker, AH00161 event, AH00484 prefork
        return "front_busy"
    if module == "wsgi":
        if not _WSGI_CODE.search(message):
            return None  # the app's own stderr output
        if "Timeout when reading response headers from daemon process" in message:
            return "read_timeout"
        if "reading response headers from daemon process" in message:
            return "upstream_reset" if "reset by peer" in message else "upstream_closed"
        if "Truncated or oversized response headers" in message:
            return "upstream_closed"
        if "exception raised processing WSGI script" in message:
            return "app_error"
    return "other" if match["level"].lower() in SERIOUS_LEVELS else None


class Apache(Front):
    kind = "apache"
    role = "apache"
    protocols = frozenset(SCHEMES)
    own_knobs = ("mpm", "max_request_workers", "threads_per_child", "start_servers")
    log_name = LOG_NAME
    app_process_prefix = "(wsgi:"  # mod_wsgi's daemon processes

    def check_hosted_access(self) -> None:
        check_daemon_access(run_as(), python_paths())

    @property
    def title(self) -> str:
        return "Apache"

    def check_knobs(self, proxy: ProxySpec) -> None:
        super().check_knobs(proxy)
        if proxy.mpm == "prefork":
            if proxy.threads_per_child is not None:
                raise ValueError(
                    "threads_per_child needs a threaded MPM (prefork runs one thread per "
                    "process); use mpm 'worker' or 'event', or remove it"
                )
            return
        threads = proxy.threads_per_child or APACHE_THREADS_PER_CHILD
        workers = proxy.max_request_workers
        if workers is not None and workers % threads:
            nearest = max(threads, workers // threads * threads)
            raise ValueError(
                f"max_request_workers {workers} must be a multiple of threads_per_child "
                f"{threads} (Apache would round it down); e.g. {nearest}"
            )

    def describe(self, proxy: ProxySpec) -> str:
        knobs = [f"{k}={getattr(proxy, k)}" for k in self.own_knobs[1:] if getattr(proxy, k)]
        return f"apache[{' '.join([proxy.apache_mpm, *knobs])}]"

    def configure(
        self, spec: StackSpec, *, workdir: Path, listen_port: int, app_address: AppAddress,
        listen_host: str = LOOPBACK,
    ) -> Configured:
        who = run_as()
        open_to(workdir, who, 0o710)
        if isinstance(app_address, Path):
            target = proxy_target(spec.proxy.protocol, socket=app_address)
        else:
            target = proxy_target(spec.proxy.protocol, port=app_address[1])
        conf = write_httpd_conf(
            spec, workdir=workdir, listen_port=listen_port, target=target, who=who,
            listen_host=listen_host,
        )
        apache_check(conf)  # before anything runs
        return Configured(conf)

    def configure_hosting(
        self, spec: StackSpec, app: ResolvedApp, hosted: Mapping[str, object], *,
        workdir: Path, listen_port: int, listen_host: str = LOOPBACK,
    ) -> Configured:
        """Apache running the app in mod_wsgi daemon processes, as mod_wsgi's ``hosting``
        says (the sampler gives the daemons role "app")."""
        who = run_as()
        python_path = [Path(p) for p in str(hosted["python_path"]).split(":") if p]
        check_daemon_access(who, [*python_paths(app.python), *python_path])
        env = app_environment(spec.app.env, app.app_dir, app.python)
        env["PYTHONUNBUFFERED"] = "1"
        open_to(workdir, who, 0o710)
        open_database(env, who)
        conf = write_httpd_conf(
            spec, workdir=workdir, listen_port=listen_port, wsgi=hosted, who=who,
            listen_host=listen_host,
        )
        apache_check(conf)
        return Configured(conf, env)

    def hosted_app_address(self, workdir: Path) -> AppAddress | None:
        # Requests wait for a daemon in the listen queue of mod_wsgi's socket.
        sockets = sorted(workdir.glob("wsgi.*.sock"))
        return sockets[0] if sockets else None

    def before_start(self, app_address: AppAddress | None, workdir: Path) -> None:
        if isinstance(app_address, Path):
            # Connectable by Apache's children (their group) only, whatever mode the
            # app server gave it (gunicorn: 0777; uWSGI: 0755, which they cannot use).
            open_to(app_address, run_as(), 0o660)

    def command(self, conf: Path) -> list[str]:
        return apache_command(conf)

    conf_name = CONF_NAME
    timeout_setting = "Timeout and ProxyPass timeout"
    pool_idle_setting = "ProxyPass ttl"

    def deploy(self, stack: StackSpec, target: FrontTarget) -> FrontDeploy:
        """httpd.conf from the measuring template in its deploy mode: mod_proxy to the app
        server, or the app in mod_wsgi daemon processes (``target.hosted``)."""
        wsgi = dict(target.hosted) if target.hosted is not None else None
        proxied = None
        if isinstance(target.upstream, Path):
            proxied = proxy_target(stack.proxy.protocol, socket=target.upstream)
        elif target.upstream is not None:
            proxied = proxy_target(stack.proxy.protocol, port=target.upstream[1])
        conf = render_httpd_conf(
            stack,
            target=proxied,
            wsgi=wsgi,
            deploy=ApacheDeploy(
                listen=target.listen,
                server_root=target.conf_dir,
                runtime_dir=target.run_dir,
                user=target.user,
                group=target.user,
                source=target.source,
            ),
        )
        path = str(target.conf_dir / CONF_NAME)
        binary = str(FALLBACK_BINARY)  # Debian's
        runs = "the app in mod_wsgi daemon processes" if wsgi else "mod_proxy to the app server"
        workers = stack.proxy.max_request_workers or 400  # the event MPM's default
        return FrontDeploy(
            files={CONF_NAME: conf},
            file_roles={
                CONF_NAME: f"Apache httpd ({stack.proxy.apache_mpm} MPM): {runs}, listening "
                f"on `{target.listen}`"
            },
            exec_start=[binary, "-f", path, "-DFOREGROUND"],
            check=[binary, "-t", "-f", path],
            check_name="apache2 -t",
            distro_unit="apache2",
            # mod_wsgi's PyPI build compiles against Apache's headers (apxs).
            apt_packages=("apache2", "apache2-dev") if wsgi else ("apache2",),
            reload_signal="USR1",  # graceful restart: children finish their requests
            stop_signal="SIGWINCH",
            stop_comment="SIGWINCH: graceful stop, the children finish their requests.",
            nofile=max(8192, 2 * workers + 1024),
            pool="" if wsgi else pool_params(stack.proxy)[1],
            pool_idle="`ttl` on the ProxyPass line",
            uses_state_dir=False,
        )

    def stage_deploy(self, conf: str, *, listen_port: int, for_boot: bool) -> str:
        conf = _LISTEN_LINE.sub(f"Listen 127.0.0.1:{listen_port}", conf)
        who = run_as() if for_boot else None

        def user(
            name: str, lookup: Callable[[str], object] = pwd.getpwnam
        ) -> str | None:
            """The user (or, with ``lookup=grp.getgrnam``, the group) to keep (or use
            instead of) ``name``; None: leave it out."""
            if for_boot:  # as root, children (never root) must reach the staged files
                return who.user if who else None
            try:
                lookup(name)
            except KeyError:
                return None
            return name

        def user_line(match: re.Match[str]) -> str:
            if match[1] == "Group":
                found = (who.group if who else None) if for_boot else user(match[2], grp.getgrnam)
            else:
                found = user(match[2])
            if found is None:
                return f"# {match[0]} (staged: not switched to here)"
            return f"{match[1]} {found}"

        def daemon_user(match: re.Match[str]) -> str:
            found = user(match[1])
            if found is None:
                return ""
            group = who.group if for_boot and who else match[2]
            return f"user={apache_quote(found)} group={apache_quote(group)} "

        return _DAEMON_USER.sub(daemon_user, _USER_LINE.sub(user_line, conf))

    def check_deploy(self, conf: Path) -> str:
        try:
            apache_check(conf, timeout_s=CHECK_TIMEOUT_S)
        except StackStartError as exc:
            raise ServelabError(
                f"the exported {CONF_NAME} fails apache2 -t: {exc.problem.split(': ', 1)[-1]}",
                "this is a servelab bug unless a knob is out of Apache's range; see Apache's "
                "message",
                detail=exc.detail,
            ) from None
        return f"apache2 -t accepts {CONF_NAME}"

    def classify_log_line(self, line: str) -> str | None:
        return classify_apache_line(line)

    def is_log_line(self, line: str) -> bool:
        return _APACHE_LINE.match(line) is not None

    def version(self) -> str | None:
        try:
            return program_version([apache_binary(), "-v"])
        except MissingToolError:
            return None

    def doctor_checks(self) -> list[Check]:
        """Optional: only proxy kind 'apache' (and server kind 'mod_wsgi') need it."""
        name = "apache2 (proxy kind 'apache')"
        try:
            binary = apache_binary()
        except MissingToolError as exc:
            return [Check(name, "warn", "not found", exc.fix)]
        return [Check(name, "ok", program_version([binary, "-v"]) or binary)]
