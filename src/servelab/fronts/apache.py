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
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servelab.apps import SERVELAB_ROOT, ResolvedApp, app_environment
from servelab.apps.interpreter import python_facts
from servelab.config.stack import ProxySpec, StackSpec
from servelab.errors import MissingToolError, ServelabError, StackStartError
from servelab.fronts.base import (
    LOOPBACK,
    AppAddress,
    Configured,
    Front,
    FrontDeploy,
    FrontTarget,
    host_port,
)
from servelab.host.doctor import Check
from servelab.host.facts import program_version
from servelab.host.paths import find_program
from servelab.host.templates import render
from servelab.observe.attribution import SERIOUS_LEVELS
from servelab.servers import mod_wsgi

CONF_NAME = "httpd.conf"
LOG_NAME = "apache.log"
MODULES_DIR = Path("/usr/lib/apache2/modules")
FALLBACK_BINARY = Path("/usr/sbin/apache2")  # not on a non-root user's PATH on Debian
RUN_USER = "www-data"
INSTALL_FIX = "scripts/setup.sh --with apache (or apt-get install apache2)"
CHECK_TIMEOUT_S = 60.0
_LISTEN_LINE = re.compile(r"^Listen\s+\S+.*$", re.MULTILINE)
_USER_LINE = re.compile(r"^(User|Group)\s+(\S+)\s*$", re.MULTILINE)
_DAEMON_USER = re.compile(r'\buser="([^"]*)" group="([^"]*)" ')
# Apache's built-in limits that bound MaxRequestWorkers and ThreadsPerChild.
_PREFORK_SERVER_LIMIT = 256
_SERVER_LIMIT = 16
_THREAD_LIMIT = 64
# Apache's ThreadsPerChild when unset (worker and event MPMs).
APACHE_THREADS_PER_CHILD = 25
# The protocol servelab speaks to the app, as mod_proxy's URL scheme and module.
_SCHEMES = {"http": "http", "fastcgi": "fcgi", "uwsgi": "uwsgi"}
_PROXY_MODULES = {"http": "proxy_http", "fastcgi": "proxy_fcgi", "uwsgi": "proxy_uwsgi"}


def apache_binary() -> str:
    """Debian's ``apache2`` (PATH, then /usr/sbin); MissingToolError with the fix."""
    found = find_program("apache2")
    if found:
        return found
    if os.access(FALLBACK_BINARY, os.X_OK):
        return str(FALLBACK_BINARY)
    raise MissingToolError("apache2 (Apache httpd) is not installed", INSTALL_FIX)


@dataclass(frozen=True)
class RunAs:
    """The user and group Apache's children switch to (when started as root)."""

    user: str
    group: str
    uid: int
    gid: int


def run_as() -> RunAs | None:
    """www-data when servelab is root (Apache's children never run as root), else None."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(RUN_USER)
    except KeyError:
        raise MissingToolError(
            f"user {RUN_USER} does not exist; Apache's children need it",
            "install apache2 (its package creates www-data)",
        ) from None
    return RunAs(RUN_USER, grp.getgrgid(entry.pw_gid).gr_name, entry.pw_uid, entry.pw_gid)


def open_to(path: Path, who: RunAs | None, mode: int) -> None:
    """Give ``who``'s group ``mode`` on ``path`` (group = who's group); no-op when not root."""
    if who is None:
        return
    os.chown(path, -1, who.gid)
    os.chmod(path, mode)


SQLITE_ENV = "SERVELAB_DJANGO_SQLITE"  # servelab.apps.django_app.settings
SQLITE_DIR_PREFIX = "servelab-sqlite-"  # userapp.app_database's temp dir


def open_database(env: dict[str, str], who: RunAs | None) -> None:
    """Let mod_wsgi's daemons (``who``) write the Django app's SQLite file, if it has one.

    Only in the private directory servelab made for it (``servelab-sqlite-*``, see
    userapp.app_database); a file elsewhere is left alone (its directory may be
    shared, /tmp itself) and must already be readable by ``who``.
    """
    db = env.get(SQLITE_ENV)
    if who is None or not db or env.get("SERVELAB_DJANGO_DB", "sqlite") != "sqlite":
        return
    path = Path(db)
    if not path.exists():
        return
    if not path.parent.name.startswith(SQLITE_DIR_PREFIX) or path.parent.is_symlink():
        check_daemon_access(who, [path])
        return
    open_to(path.parent, who, 0o770)  # SQLite creates its journal beside the file
    for extra in (path, *(path.with_name(path.name + s) for s in ("-journal", "-wal", "-shm"))):
        if extra.exists():
            open_to(extra, who, 0o660)


def check_daemon_access(who: RunAs | None, paths: list[Path]) -> None:
    """StackStartError unless ``who`` can read every path (mod_wsgi daemons run as it)."""
    if who is None:
        return
    argv = ["/bin/sh", "-c", 'for p; do [ -r "$p" ] || { echo "$p"; exit 1; }; done', "sh"]
    done = subprocess.run(
        [*argv, *map(str, paths)], user=who.uid, group=who.gid, extra_groups=[],
        capture_output=True, text=True, timeout=10, check=False, stdin=subprocess.DEVNULL,
    )
    if done.returncode == 0:
        return
    blocked = done.stdout.strip() or "one of " + ", ".join(map(str, paths))
    top = _first_closed_dir(Path(blocked))
    raise StackStartError(
        f"mod_wsgi's daemon processes run as {who.user}, which cannot read {blocked}"
        + (f" ({top} is closed to it)" if top else ""),
        "scripts/setup.sh --with apache lets it traverse the project's directories (undo: "
        f"--undo-acl), or `setfacl -m u:{who.user}:x {top or '<dir>'}` (undo: setfacl -x "
        f"u:{who.user} {top or '<dir>'})",
    )


def python_paths(python: Path | None = None) -> list[Path]:
    """What mod_wsgi's daemons read of the app's Python (None: servelab's): its stdlib
    and the venv."""
    if python is None:
        stdlib, purelib = sysconfig.get_path("stdlib"), sysconfig.get_path("purelib")
    else:
        facts = python_facts(str(python))
        stdlib, purelib = facts.stdlib, facts.purelib
    return [Path(stdlib) / "os.py", Path(purelib)]


def _first_closed_dir(path: Path) -> Path | None:
    """The outermost directory above ``path`` that others cannot search (0700 /root...)."""
    for parent in reversed(path.parents):
        try:
            if not parent.stat().st_mode & 0o001:
                return parent
        except OSError:
            return parent
    return None


def proxy_target(
    protocol: str, *, port: int | None = None, socket: Path | None = None
) -> str:
    """The ProxyPass URL: ``http://127.0.0.1:PORT/`` or ``unix:/path|http://localhost/``."""
    scheme = _SCHEMES[protocol]
    if socket is not None:
        return f"unix:{socket}|{scheme}://localhost/"
    if port is None:
        raise ValueError("give a port or a socket path")
    return f"{scheme}://127.0.0.1:{port}/"


def pool_params(proxy: ProxySpec) -> tuple[str, str]:
    """ProxyPass connection-pool parameters for ``upstream_keepalive``, and why.

    mod_proxy reuses backend connections by default, in a pool kept per Apache
    child process (not shared between children); ``max`` is that pool's hard
    cap, default ThreadsPerChild (1 under prefork), and ``ttl`` closes
    connections idle that long. 0 → ``disablereuse=On`` (a new connection
    per request, as nginx without keepalive); N → ``max=N ttl=<upstream
    keepalive timeout>``: at most N connections per child, busy or idle (a
    thread beyond them waits for one), unlike nginx's N *idle* connections
    per worker. prefork keeps a single connection per child and ignores ttl.
    """
    if proxy.upstream_keepalive == 0:
        return "disablereuse=On", "off (disablereuse=On: a new connection per request)"
    return (
        f"max={proxy.upstream_keepalive} ttl={proxy.upstream_keepalive_timeout_s}",
        f"reused, at most {proxy.upstream_keepalive} connections per Apache child (busy or "
        f"idle), idle ones closed after {proxy.upstream_keepalive_timeout_s} s",
    )


def _limits(proxy: ProxySpec) -> tuple[int | None, int | None]:
    """ServerLimit and ThreadLimit to render, raised only when the knobs need it."""
    workers = proxy.max_request_workers
    if proxy.apache_mpm == "prefork":
        return (workers if workers and workers > _PREFORK_SERVER_LIMIT else None), None
    threads = proxy.threads_per_child or APACHE_THREADS_PER_CHILD
    thread_limit = threads if threads > _THREAD_LIMIT else None
    children = -(-workers // threads) if workers else 0
    return (children if children > _SERVER_LIMIT else None), thread_limit


def _modules(spec: StackSpec, wsgi_module: Path | None) -> list[tuple[str, Path]]:
    mpm = spec.proxy.apache_mpm
    names = [f"mpm_{mpm}", "authz_core"]
    if spec.proxy.gzip:
        names += ["filter", "deflate"]
    if wsgi_module is None:
        names += ["proxy", _PROXY_MODULES[spec.proxy.protocol]]
    modules = [(f"{name}_module", MODULES_DIR / f"mod_{name}.so") for name in names]
    if wsgi_module is not None:
        modules.append(("wsgi_module", wsgi_module))
    return modules


@dataclass(frozen=True)
class ApacheDeploy:
    """Where an exported httpd.conf (``servelab export``) puts things on the target machine,
    instead of a private temp dir."""

    listen: str  # what follows ``Listen``: "80", "0.0.0.0:8080"
    server_root: Path  # its config directory
    runtime_dir: Path  # pid file, scoreboard, mod_wsgi's sockets
    user: str  # the children's user (Debian's www-data)
    group: str
    error_log: str = "/dev/stderr"  # under systemd: the journal
    source: str = "a servelab result"  # named in the header comment


def render_httpd_conf(
    spec: StackSpec,
    *,
    workdir: Path | None = None,
    listen_port: int | None = None,
    listen_host: str = LOOPBACK,
    target: str | None = None,
    wsgi: dict[str, object] | None = None,
    wsgi_module: Path | None = None,
    who: RunAs | None = None,
    python: Path | None = None,
    deploy: ApacheDeploy | None = None,
) -> str:
    """httpd.conf: mod_proxy to ``target`` (see :func:`proxy_target`), or with ``wsgi``
    (:func:`wsgi_settings`) the app in mod_wsgi daemon processes.

    Measuring: everything in ``workdir``, listening on 127.0.0.1:``listen_port``. With
    ``deploy``: the same config for a real machine, with its paths and listen address.
    """
    if (target is None) == (wsgi is None):
        raise ValueError("give a proxy target or mod_wsgi settings, not both")
    if wsgi is not None and wsgi_module is None:
        wsgi_module = mod_wsgi.mod_wsgi_module(python)
    if deploy is not None:
        places: dict[str, object] = {
            "server_root": deploy.server_root,
            "runtime_dir": deploy.runtime_dir,
            "error_log": deploy.error_log,
            "listen": deploy.listen,
            "run_user": deploy.user,
            "run_group": deploy.group,
        }
    elif workdir is None or listen_port is None:
        raise ValueError("give workdir and listen_port, or deploy")
    else:
        places = {
            "server_root": workdir,
            "runtime_dir": workdir,
            "error_log": workdir / LOG_NAME,
            "listen": host_port(listen_host, listen_port),
            "run_user": who.user if who else None,
            "run_group": who.group if who else None,
        }
    server_limit, thread_limit = _limits(spec.proxy)
    pool, pool_comment = pool_params(spec.proxy)
    return render(
        "httpd.conf.j2",
        q=apache_quote,
        proxy=spec.proxy,
        stack_name=spec.name,
        workdir=workdir,
        deploy=deploy,
        modules=_modules(spec, wsgi_module if wsgi is not None else None),
        server_limit=server_limit,
        thread_limit=thread_limit,
        target=target,
        pool=pool,
        pool_comment=pool_comment,
        wsgi=wsgi,
        **places,
    )


def apache_quote(value: object) -> str:
    """``value`` as a double-quoted Apache config string."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def write_httpd_conf(
    spec: StackSpec,
    *,
    workdir: Path,
    listen_port: int,
    listen_host: str = LOOPBACK,
    target: str | None = None,
    app: ResolvedApp | None = None,
    python_path: list[Path] | None = None,
    who: RunAs | None = None,
) -> Path:
    """Render httpd.conf (and for mod_wsgi the app's script) into ``workdir``."""
    wsgi = None
    if app is not None:
        wsgi = mod_wsgi.wsgi_settings(spec.server, app, workdir, python_path or [])
        script = workdir / mod_wsgi.SCRIPT_NAME
        script.write_text(mod_wsgi.wsgi_script(app.gunicorn_target))
        script.chmod(0o644)
    conf = workdir / CONF_NAME
    conf.write_text(
        render_httpd_conf(
            spec, workdir=workdir, listen_port=listen_port, target=target, wsgi=wsgi, who=who,
            python=app.python if app is not None else None,
            listen_host=listen_host,
        )
    )
    return conf


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
    protocols = frozenset(_SCHEMES)
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
        self, spec: StackSpec, app: ResolvedApp, *, workdir: Path, listen_port: int,
        listen_host: str = LOOPBACK,
    ) -> Configured:
        """Apache running the app in mod_wsgi daemon processes (the sampler gives the
        daemons role "app")."""
        who = run_as()
        own_root = SERVELAB_ROOT if app.python is None else None  # built-in apps import it
        python_path = [p for p in (app.app_dir, own_root) if p is not None]
        check_daemon_access(who, [*python_paths(app.python), *python_path])
        env = app_environment(spec.app.env, app.app_dir, app.python)
        env["PYTHONUNBUFFERED"] = "1"
        open_to(workdir, who, 0o710)
        open_database(env, who)
        conf = write_httpd_conf(
            spec, workdir=workdir, listen_port=listen_port, app=app, python_path=python_path,
            who=who, listen_host=listen_host,
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
            wsgi_module=Path(str(wsgi["module"])) if wsgi else None,
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
