"""Apache's httpd.conf (``httpd.conf.j2``), rendered for a measured stack (everything in
its private directory, loopback only) or for a real machine (``ApacheDeploy``):
mod_proxy to an app server, or mod_wsgi daemon mode."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from servelab.config.stack import ProxySpec, StackSpec
from servelab.fronts.apache_user import RunAs
from servelab.host.templates import render
from servelab.plugins.front import LOOPBACK, host_port

CONF_NAME = "httpd.conf"
LOG_NAME = "apache.log"
MODULES_DIR = Path("/usr/lib/apache2/modules")
# Apache's built-in limits that bound MaxRequestWorkers and ThreadsPerChild.
_PREFORK_SERVER_LIMIT = 256
_SERVER_LIMIT = 16
_THREAD_LIMIT = 64
# Apache's ThreadsPerChild when unset (worker and event MPMs).
APACHE_THREADS_PER_CHILD = 25
# The protocol servelab speaks to the app, as mod_proxy's URL scheme and module.
SCHEMES = {"http": "http", "fastcgi": "fcgi", "uwsgi": "uwsgi"}
_PROXY_MODULES = {"http": "proxy_http", "fastcgi": "proxy_fcgi", "uwsgi": "proxy_uwsgi"}


def proxy_target(
    protocol: str, *, port: int | None = None, socket: Path | None = None
) -> str:
    """The ProxyPass URL: ``http://127.0.0.1:PORT/`` or ``unix:/path|http://localhost/``."""
    scheme = SCHEMES[protocol]
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
    wsgi: Mapping[str, object] | None = None,
    who: RunAs | None = None,
    deploy: ApacheDeploy | None = None,
) -> str:
    """httpd.conf: mod_proxy to ``target`` (see :func:`proxy_target`), or with ``wsgi``
    the app in mod_wsgi daemon processes (what the server says: ``AppServer.hosting``
    when measuring, ``ServerDeploy.hosted`` when exporting, the ``module`` to load
    included).

    Measuring: everything in ``workdir``, listening on 127.0.0.1:``listen_port``. With
    ``deploy``: the same config for a real machine, with its paths and listen address.
    """
    if (target is None) == (wsgi is None):
        raise ValueError("give a proxy target or mod_wsgi settings, not both")
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
        modules=_modules(spec, Path(str(wsgi["module"])) if wsgi is not None else None),
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
    wsgi: Mapping[str, object] | None = None,
    who: RunAs | None = None,
) -> Path:
    """Render httpd.conf into ``workdir`` (``target`` or ``wsgi``: see
    :func:`render_httpd_conf`)."""
    conf = workdir / CONF_NAME
    conf.write_text(
        render_httpd_conf(
            spec, workdir=workdir, listen_port=listen_port, target=target, wsgi=wsgi, who=who,
            listen_host=listen_host,
        )
    )
    return conf
