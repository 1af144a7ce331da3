"""What every front module provides (nothing, nginx, Apache), so the launcher, spec
validation and ``servelab doctor`` never name one.

A front module defines one ``Front`` subclass, listed once in ``servelab.registry``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from servelab.config.stack import ProxySpec, StackSpec
from servelab.host.doctor import Check
from servelab.registry import FRONTS

if TYPE_CHECKING:
    from servelab.apps import ResolvedApp

LOOPBACK = "127.0.0.1"  # where a measured stack listens unless told (--listen)


def host_port(host: str, port: int) -> str:
    """``host:port`` as nginx, Apache and URLs write it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


AppAddress = tuple[str, int] | Path  # where the app server listens: (host, port) or a socket


@dataclass(frozen=True)
class FrontTarget:
    """Where an exported front runs on the target machine (``servelab export``)."""

    name: str  # the deployment's name
    listen: str  # "80", "0.0.0.0:8080" (checked by ``servelab.export.layout.check_listen``)
    conf_dir: Path  # where its config files go
    run_dir: Path  # its unit's RuntimeDirectory (pid file, sockets of its own)
    state_dir: Path  # its unit's StateDirectory (temp files)
    user: str  # its workers' user: a member of the app socket's group
    upstream: AppAddress | None  # where the app server listens; None: the front runs the app
    hosted: Mapping[str, object] | None  # the app it runs itself (``ServerDeploy.hosted``)
    source: str  # named in the files' header comments


@dataclass(frozen=True)
class FrontDeploy:
    """A front's part of a deployable set, and what its unit and the README say about it."""

    files: dict[str, str]  # config files for conf_dir (``Front.conf_name`` among them)
    file_roles: dict[str, str]  # file -> what it is (README)
    exec_start: list[str]  # the unit's command line (in the foreground)
    check: list[str]  # its own config check, before every start and reload
    check_name: str  # "nginx -t"
    distro_unit: str  # the distribution's own unit of it, to keep off the same port
    apt_packages: tuple[str, ...]  # what to install on Debian
    reload_signal: str  # graceful reload
    stop_signal: str  # graceful stop
    stop_comment: str  # what the stop signal does
    nofile: int  # the unit's LimitNOFILE
    pool: str  # what the README says of its connections to the app (upstream keepalive)
    pool_idle: str  # the setting that closes its idle connections to the app
    uses_state_dir: bool = True
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Configured:
    """A front's config file, checked, and the environment its process needs."""

    conf: Path
    env: Mapping[str, str] | None = None  # None: servelab's own environment


class Front(ABC):
    """One front: the knobs it owns, its config, its process."""

    kind: ClassVar[str]
    # The role its process has in a running stack (also its log's source); None: no process.
    role: ClassVar[str | None] = None
    protocols: ClassVar[frozenset[str]] = frozenset({"http"})  # what it speaks to the app
    # ProxySpec knobs only this front has (set on another front they are an error).
    own_knobs: ClassVar[tuple[str, ...]] = ()

    def check_knobs(self, proxy: ProxySpec) -> None:
        """ValueError for another front's knobs, or values this front cannot take."""
        for kind in FRONTS.names:
            front = FRONTS.get(kind)
            if kind == self.kind:
                continue
            ignore_valued = self.role is None
            given = [k for k in front.own_knobs if _is_set(proxy, k, ignore_valued=ignore_valued)]
            if given:
                plural = len(given) > 1
                raise ValueError(
                    f"{', '.join(given)}: {front.title} knob{'s' if plural else ''}; set proxy "
                    f"kind '{kind}' or remove {'them' if plural else 'it'}"
                )

    @property
    def title(self) -> str:
        return self.kind

    @abstractmethod
    def describe(self, proxy: ProxySpec) -> str:
        """The front part of a stack's one-line description ("" for none)."""

    def configure(
        self, spec: StackSpec, *, workdir: Path, listen_port: int, app_address: AppAddress,
        listen_host: str = LOOPBACK,
    ) -> Configured:
        """Write the config that forwards ``listen_host:listen_port`` to the app, checked
        before anything runs (``nginx -t``)."""
        raise NotImplementedError(f"{self.kind} has no config")

    def configure_hosting(
        self, spec: StackSpec, app: ResolvedApp, hosted: Mapping[str, object], *,
        workdir: Path, listen_port: int, listen_host: str = LOOPBACK,
    ) -> Configured:
        """The config of a front that runs the app itself (a server ``inside_front``),
        with what that server says about it (``hosted``: ``AppServer.hosting``)."""
        raise NotImplementedError(f"{self.kind} cannot run an app itself")

    def check_hosted_access(self) -> None:
        """For a front that runs the app itself: ServelabError when the processes it runs
        the app in cannot read servelab's Python (asked by the hosted server's doctor)."""
        return None

    def hosted_app_address(self, workdir: Path) -> AppAddress | None:
        """Where requests wait for the app it runs itself (its listen queue), if known."""
        return None

    def before_start(self, app_address: AppAddress | None, workdir: Path) -> None:
        """Last preparations once the app server listens (e.g. its socket's mode)."""
        return None

    def command(self, conf: Path) -> list[str]:
        raise NotImplementedError(f"{self.kind} runs no process")

    log_name: ClassVar[str] = ""
    # How its processes that run the app itself are named (argv[0] prefix), if any: the
    # CPU and memory sampler counts them as the app's.
    app_process_prefix: ClassVar[str | None] = None

    # Its main config file in an exported set; its settings named in the export's README
    # and adjustments ("proxy_read_timeout").
    conf_name: ClassVar[str] = ""
    timeout_setting: ClassVar[str] = "timeout"
    pool_idle_setting: ClassVar[str] = "idle connection timeout"

    def deploy(self, stack: StackSpec, target: FrontTarget) -> FrontDeploy | None:
        """Its part of a deployable set (``servelab export``); None: not exportable."""
        return None

    @property
    def exportable(self) -> bool:
        return type(self).deploy is not Front.deploy

    def stage_deploy(self, conf: str, *, listen_port: int, for_boot: bool) -> str:
        """Its exported config ``conf`` (paths already moved) made runnable here: listening
        on 127.0.0.1:``listen_port``; users that do not exist here (``for_boot``: users
        it cannot switch to) left out."""
        raise NotImplementedError(f"{self.kind} is not exportable")

    def check_deploy(self, conf: Path) -> str:
        """Its own check of a staged config (``nginx -t``): what was checked;
        ServelabError (one line, its own message) when it fails."""
        raise NotImplementedError(f"{self.kind} is not exportable")

    def classify_log_line(self, line: str) -> str | None:
        """The event class of one line of its error log (``servelab.observe.attribution``),
        None for a line that is no event."""
        return None

    def is_log_line(self, line: str) -> bool:
        """Whether ``line`` starts an entry of its log (not a continuation)."""
        return False

    def version(self) -> str | None:
        return None

    def doctor_checks(self) -> list[Check]:
        return []


def _is_set(proxy: ProxySpec, knob: str, *, ignore_valued: bool) -> bool:
    """Whether ``knob`` differs from its default. A knob whose default is a value (nginx's)
    is inherited by a variant without a front from its baseline and ignored there
    (``ignore_valued``); a knob unset by default (Apache's) was set on purpose."""
    default = ProxySpec.model_fields[knob].default
    if ignore_valued and default is not None:
        return False
    return getattr(proxy, knob) != default


def get_front(kind: str) -> Front:
    """The front registered as ``kind``; SpecError naming the choices if none is."""
    found = FRONTS.get(kind)
    if not isinstance(found, Front):
        raise TypeError(f"{FRONTS.entries[kind]} is not a Front")
    return found
