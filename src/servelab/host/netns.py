"""Private network namespaces, so net.core.somaxconn can be set without touching the host.

``net.core.somaxconn`` is per network namespace, and ``listen()`` caps every
backlog (TCP and unix sockets alike) at the value of the namespace the socket
was created in. A stack that must see somaxconn 128 therefore runs, with its
load driver, inside a namespace servelab creates (``servelab-<pid>-<n>``),
brings ``lo`` up in, sets the sysctl in, and always deletes again, also on
error and Ctrl-C. Namespaces left behind by a servelab that was SIGKILLed are
removed the next time one is created.

How processes get in:

- programs servelab starts (servers, the load driver, ``ss``) run as
  ``ip netns exec NAME argv...``; ``ip`` execs the program, so its pid is the
  program's own and process groups work as before;
- servelab's own sockets (readiness probes, picking a free port) are made in
  a helper thread that first calls ``setns(fd, CLONE_NEWNET)`` through libc.
  Python 3.11 has no ``os.setns``; setns changes only the calling thread, so
  the rest of servelab stays in the host's namespace, and a socket keeps the
  namespace it was created in whichever thread uses it afterwards. This was
  chosen over a probe subprocess because the readiness probe already runs in
  its own thread and must notice a dying server while it waits.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import TypeVar

from servelab.errors import ServelabError, SpecError
from servelab.host.cgroups import CpuGroup
from servelab.host.procs import JANITOR

T = TypeVar("T")

PREFIX = "servelab-"
NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
SOMAXCONN_MIN = 1
# listen() stores the backlog in a 32-bit field since Linux 5.4 but older
# kernels cut it to 16 bits; values above 65535 buy nothing in practice.
SOMAXCONN_MAX = 65535
COMMAND_TIMEOUT_S = 15.0
_NAME = re.compile(rf"^{re.escape(PREFIX)}(?P<pid>\d+)-(?P<n>\d+)$")
_counter = count(1)
_counter_lock = threading.Lock()


class NamespaceError(ServelabError):
    """A network namespace could not be created, configured or entered."""

    exit_code = 6


def check_somaxconn(value: int) -> int:
    """``value`` if it is a usable net.core.somaxconn, else a one-line SpecError."""
    if not SOMAXCONN_MIN <= value <= SOMAXCONN_MAX:
        raise SpecError(
            f"somaxconn {value} is out of range",
            f"use a value from {SOMAXCONN_MIN} to {SOMAXCONN_MAX} (the seed used 128 and 1024)",
        )
    return value


def unavailable_reason() -> str | None:
    """Why servelab cannot make network namespaces here (None when it can)."""
    if os.geteuid() != 0:
        return "creating a network namespace needs root"
    if shutil.which("ip") is None:
        return "the `ip` program (Debian package iproute2) is not installed"
    return None


def ip_program() -> str:
    found = shutil.which("ip")
    if found is None:
        raise NamespaceError(
            "the `ip` program is not installed", "servelab setup (or apt-get install iproute2)"
        )
    return found


def exec_prefix(name: str) -> list[str]:
    """argv prefix that runs a program inside namespace ``name``."""
    return [ip_program(), "netns", "exec", name]


def _run_ip(args: list[str], what: str, fix: str) -> None:
    try:
        done = subprocess.run(
            [ip_program(), *args],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=COMMAND_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise NamespaceError(f"{what}: `ip {' '.join(args)}` hung", fix) from None
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        raise NamespaceError(f"{what}: {message[-1] if message else 'ip failed'}", fix)


def servelab_namespaces() -> list[str]:
    """Names of servelab's namespaces that exist now (any servelab process's)."""
    try:
        names = [p.name for p in NETNS_DIR.iterdir()]
    except OSError:
        return []
    return sorted(n for n in names if _NAME.match(n))


def remove_stale_namespaces() -> list[str]:
    """Delete servelab namespaces whose creator process is gone; the names removed."""
    removed = []
    for name in servelab_namespaces():
        match = _NAME.match(name)
        assert match is not None
        pid = int(match["pid"])
        if pid == os.getpid() or Path(f"/proc/{pid}").exists():
            continue
        with contextlib.suppress(NamespaceError):
            _run_ip(["netns", "delete", name], "remove stale namespace", "")
            removed.append(name)
    return removed


@dataclass
class NetNamespace:
    """A namespace that exists (inside :func:`network_namespace`)."""

    name: str
    somaxconn: int | None

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def prefix(self) -> list[str]:
        return exec_prefix(self.name)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this namespace."""
        return [*self.prefix(), *argv]

    def enter_current_thread(self) -> None:
        """Move the calling thread (only it) into this namespace. For helper threads only."""
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                errno = ctypes.get_errno()
                raise NamespaceError(
                    f"cannot enter network namespace {self.name}: {os.strerror(errno)}",
                    "run servelab as root",
                )
        finally:
            os.close(fd)

    def call(self, func: Callable[[], T], timeout_s: float = 60.0) -> T:
        """Run ``func`` in a helper thread inside this namespace; its result or exception."""
        box: dict[str, object] = {}

        def target() -> None:
            try:
                self.enter_current_thread()
                box["value"] = func()
            except BaseException as exc:
                box["error"] = exc

        thread = threading.Thread(target=target, name=f"servelab-netns-{self.name}", daemon=True)
        thread.start()
        thread.join(timeout_s)
        if thread.is_alive():
            raise NamespaceError(f"a call inside namespace {self.name} hung", "rerun")
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        return box["value"]  # type: ignore[return-value]

    def read_somaxconn(self) -> int:
        done = subprocess.run(
            [*self.prefix(), "cat", "/proc/sys/net/core/somaxconn"],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=True,
            stdin=subprocess.DEVNULL,
        )
        return int(done.stdout.strip())


def new_name() -> str:
    with _counter_lock:
        n = next(_counter)
    return f"{PREFIX}{os.getpid()}-{n}"


@contextlib.contextmanager
def network_namespace(somaxconn: int | None = None) -> Iterator[NetNamespace]:
    """Create a namespace with ``lo`` up and (optionally) its somaxconn set; delete it after.

    Raises NamespaceError with the reason and a fix when it cannot be created.
    The namespace is deleted on every way out, Ctrl-C included; processes still
    inside keep it alive until they exit, so callers stop theirs first.
    """
    if somaxconn is not None:
        check_somaxconn(somaxconn)
    reason = unavailable_reason()
    if reason is not None:
        raise NamespaceError(
            f"cannot create a network namespace: {reason}",
            "run as root, or pass --netns off to emulate somaxconn with the app's backlog",
        )
    remove_stale_namespaces()
    name = new_name()
    fix = "run as root on a kernel with network namespaces, or pass --netns off"
    _run_ip(["netns", "add", name], f"cannot create network namespace {name}", fix)
    JANITOR.watch("netns", name)  # deleted even if servelab is SIGKILLed
    try:
        _run_ip(
            ["-n", name, "link", "set", "lo", "up"], f"cannot bring up lo in {name}", fix
        )
        namespace = NetNamespace(name, somaxconn)
        if somaxconn is not None:
            _run_ip(
                ["netns", "exec", name, "sysctl", "-q", "-w", f"net.core.somaxconn={somaxconn}"],
                f"cannot set net.core.somaxconn={somaxconn} in {name}",
                "check that sysctl (Debian package procps) is installed",
            )
            seen = namespace.read_somaxconn()
            if seen != somaxconn:
                raise NamespaceError(
                    f"net.core.somaxconn in {name} reads {seen} after setting {somaxconn}",
                    "this kernel may clamp the value; choose a smaller one",
                )
        yield namespace
    finally:
        delete_namespace(name)
        JANITOR.forget("netns", name)


def delete_namespace(name: str) -> None:
    """Delete ``name``; a second Ctrl-C meanwhile does not stop the deletion."""
    try:
        _run_ip(["netns", "delete", name], f"cannot delete network namespace {name}", "")
    except NamespaceError:
        if (NETNS_DIR / name).exists():
            raise
    except KeyboardInterrupt:
        with contextlib.suppress(Exception):
            _run_ip(["netns", "delete", name], "", "")
        raise


@dataclass(frozen=True)
class Placement:
    """Where one stack runs: in a namespace of its own, or on the host's network.

    ``backlog_cap`` is set when somaxconn had to be emulated without a namespace:
    the app server's backlog is then capped at it, which gives the app's listen
    socket the same queue length (as long as the host's somaxconn is not lower).
    """

    namespace: NetNamespace | None
    somaxconn: int | None  # what listen() is capped at where the stack runs
    backlog_cap: int | None = None
    note: str = ""
    quota: CpuGroup | None = None  # the stack's cgroup (CPU-time cap, weight), if any

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` made to start inside the stack's cgroup and the namespace, if any.

        The cgroup is joined first, on the host: ``ip netns exec`` remounts /sys,
        so inside the namespace the cgroup tree is not where it was.
        """
        argv = self.namespace.wrap(argv) if self.namespace else list(argv)
        return self.quota.wrap(argv) if self.quota else argv

    def driver_prefix(self) -> list[str]:
        """What the load driver's argv starts with: the stack's namespace, never its quota."""
        return self.namespace.wrap([]) if self.namespace else []


def host_somaxconn() -> int | None:
    try:
        return int(Path("/proc/sys/net/core/somaxconn").read_text())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def place_stack(somaxconn: int | None, mode: str = "auto") -> Iterator[Placement]:
    """The placement for a stack asking for ``somaxconn`` with namespace ``mode``
    ("auto", "require" or "off"; see ``spec.NetworkSpec``)."""
    reason = unavailable_reason()
    wants_namespace = mode == "require" or (somaxconn is not None and mode == "auto")
    if wants_namespace and (reason is None or mode == "require"):
        with network_namespace(somaxconn) as namespace:
            seen = somaxconn if somaxconn is not None else namespace.read_somaxconn()
            yield Placement(namespace, seen)
        return
    host = host_somaxconn()
    if somaxconn is None:
        yield Placement(None, host)
        return
    check_somaxconn(somaxconn)
    why = reason if mode == "auto" else "namespace = 'off'"
    note = (
        f"no network namespace ({why}): somaxconn {somaxconn} emulated by capping the app "
        f"server's backlog at {somaxconn}; the host's somaxconn ({host}) is unchanged"
    )
    if host is not None and host < somaxconn:
        note += f", and lower, so the effective backlog is at most {host}"
    yield Placement(None, host, backlog_cap=somaxconn, note=note)
