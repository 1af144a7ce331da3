"""A slow link to the database: added latency and jitter, as over the seed's WiFi.

The apache-vs-nginx seed had the Django app's PostgreSQL on another laptop
over WiFi: every query paid a network round trip. servelab reproduces that
with one of two tools, and records which one it used:

- **netem** (where the kernel has the ``sch_netem`` qdisc): PostgreSQL runs in
  a private network namespace joined to the host by a veth pair, and both ends
  of the pair get a ``netem delay`` qdisc. The kernel delays the packets, so
  nothing runs in between. ``netem_link`` builds it; PostgreSQL is started
  inside it (``servelab.services.postgres.run_postgres(namespace=...)``).
- **toxiproxy** (anywhere): a TCP proxy, Shopify's toxiproxy, between the app
  and PostgreSQL, with ``latency`` toxics. It runs as one more process (a Go
  program, `servelab setup --with toxiproxy` builds it into servelab's cache) and copies every
  byte through user space, which costs a little CPU on the shared cores.

Both add ``latency_ms`` to every round trip, half in each direction, because
a network delays the query on its way to the server and the answer on its way
back: one query (one round trip) gets +latency, a page that runs N queries
gets about N x latency. Each direction's delay is drawn from half the latency
± half the jitter, so a round trip's delay stays within latency ± jitter.
toxiproxy works in whole milliseconds (its attributes are integers): the
round trip is rounded to whole milliseconds and split as evenly as integers
allow, and ``SlowLink`` records what was applied. toxiproxy delays each chunk
it reads by ``latency`` ± ``jitter`` measured from when it was read (chunks of
one connection stay in order), so a burst of answer rows is delayed once, not
once per chunk.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from servelab.errors import MissingToolError, SpecError, StackStartError
from servelab.host.procs import JANITOR, OWNER_ENV, ManagedProcess, free_port

Method = Literal["netem", "toxiproxy"]
PROXY_NAME = "postgres"
API_TIMEOUT_S = 5.0
NETEM_FIX = (
    # No square brackets: the CLI prints errors with rich markup.
    "set link = 'toxiproxy' (or 'auto', which falls back to it) in the experiment file's "
    "database table, or load the kernel's netem module (modprobe sch_netem)"
)


@dataclass(frozen=True)
class SlowLink:
    """Where the app connects to reach the database over the slowed link, and how."""

    host: str
    port: int
    method: Method
    tool_version: str
    latency_ms: float  # added to every round trip, as applied
    jitter_ms: float

    def describe(self) -> str:
        """'toxiproxy 2.12.0, +20 ms ± 5 ms latency per round trip'."""
        tool = f"{self.method} {self.tool_version}".strip()
        spread = f" ± {self.jitter_ms:g} ms" if self.jitter_ms else ""
        return f"{tool}, +{self.latency_ms:g} ms{spread} latency per round trip"


# --------------------------------------------------------------------------
# How the round trip's delay is split between the directions


def split_round_trip(latency_ms: float, jitter_ms: float) -> tuple[tuple[float, float], ...]:
    """((latency, jitter) toward the server, (latency, jitter) back): half each way."""
    half = (latency_ms / 2, jitter_ms / 2)
    return (half, half)


def whole_ms_split(latency_ms: float, jitter_ms: float) -> tuple[tuple[int, int], ...]:
    """The round trip in whole milliseconds (toxiproxy's unit), split as evenly as
    integers allow: ((upstream latency, jitter), (downstream latency, jitter))."""
    latency, jitter = round(latency_ms), min(round(jitter_ms), round(latency_ms))
    up = (latency // 2, jitter // 2)
    return (up, (latency - up[0], jitter - up[1]))


# --------------------------------------------------------------------------
# toxiproxy


def proxy_payload(target_host: str, target_port: int) -> dict[str, Any]:
    """POST /proxies: listen on a port toxiproxy picks (``:0``), forward to the target."""
    return {
        "name": PROXY_NAME,
        "listen": "127.0.0.1:0",
        "upstream": f"{target_host}:{target_port}",
        "enabled": True,
    }


def toxic_payloads(latency_ms: float, jitter_ms: float) -> list[dict[str, Any]]:
    """POST /proxies/<name>/toxics bodies: a latency toxic per direction that delays.

    toxiproxy's ``upstream`` stream is client -> server (the query), ``downstream``
    server -> client (the answer); a direction whose share rounds to 0 ms gets none.
    """
    up, down = whole_ms_split(latency_ms, jitter_ms)
    return [
        {
            "name": f"latency_{stream}",
            "type": "latency",
            "stream": stream,
            "toxicity": 1.0,
            "attributes": {"latency": latency, "jitter": jitter},
        }
        for stream, (latency, jitter) in (("upstream", up), ("downstream", down))
        if latency > 0
    ]


def _api(base: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(
        base + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no http_proxy
    with opener.open(request, timeout=API_TIMEOUT_S) as answer:
        return json.loads(answer.read() or b"null")


def _toxiproxy_program() -> tuple[str, str]:
    from servelab.host.paths import toxiproxy_server

    found = toxiproxy_server()
    if found is None:
        raise MissingToolError(
            "toxiproxy is not installed (it slows the link to the database)",
            "servelab setup --with toxiproxy (builds toxiproxy with go)",
        )
    path, version = found
    if version is None:
        said = subprocess.run(
            [path, "-version"], capture_output=True, text=True, timeout=10, check=False
        )
        version = (said.stdout or said.stderr).strip().rsplit(" ", 1)[-1] or "unknown"
    return path, version


@contextmanager
def _toxiproxy(
    target_host: str, target_port: int, latency_ms: float, jitter_ms: float, cpus: str | None
) -> Iterator[SlowLink]:
    program, version = _toxiproxy_program()
    workdir = Path(tempfile.mkdtemp(prefix="servelab-toxiproxy-"))
    JANITOR.watch("path", workdir)
    process: ManagedProcess | None = None
    try:
        port = free_port()
        process = ManagedProcess(
            "toxiproxy",
            [program, "-host", "127.0.0.1", "-port", str(port)],
            log_path=workdir / "toxiproxy.log",
            cwd=workdir,
            env={OWNER_ENV: str(os.getpid()), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            cpus=cpus,
        ).start()
        base = f"http://127.0.0.1:{port}"
        _wait_api(base, process)
        toxics = toxic_payloads(latency_ms, jitter_ms)
        try:
            proxy = _api(base, "POST", "/proxies", proxy_payload(target_host, target_port))
            for toxic in toxics:
                _api(base, "POST", f"/proxies/{PROXY_NAME}/toxics", toxic)
        except (OSError, ValueError) as exc:
            raise StackStartError(
                f"toxiproxy refused the proxy to {target_host}:{target_port}: {_reason(exc)}",
                "see toxiproxy's log below",
                detail=process.log_tail(),
            ) from None
        host, _, listen_port = proxy["listen"].rpartition(":")
        applied = sum(t["attributes"]["latency"] for t in toxics)
        jitter = sum(t["attributes"]["jitter"] for t in toxics)
        yield SlowLink(host, int(listen_port), "toxiproxy", version, applied, jitter)
    finally:
        if process is not None:
            process.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        JANITOR.forget("path", workdir)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        with contextlib.suppress(Exception):
            return f"HTTP {exc.code}: {json.loads(exc.read()).get('error')}"
        return f"HTTP {exc.code}"
    return str(exc)


def _wait_api(base: str, process: ManagedProcess, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.exit_code() is not None:
            raise StackStartError(
                f"toxiproxy exited during start-up (exit code {process.exit_code()})",
                "see its log below",
                detail=process.log_tail(),
            )
        with contextlib.suppress(OSError, ValueError):
            _api(base, "GET", "/proxies")
            return
        time.sleep(0.05)
    raise StackStartError(
        f"toxiproxy's API did not answer within {timeout_s:g} s",
        "see its log below",
        detail=process.log_tail(),
    )


# --------------------------------------------------------------------------
# netem


@dataclass(frozen=True)
class NetemLink:
    """A namespace for the server, joined to the host by a veth pair that delays.

    The server listens on ``ns_ip`` inside ``namespace``; the host reaches it
    through ``host_if`` (address ``host_ip``).
    """

    namespace: Any  # servelab.host.netns.NetNamespace
    host_if: str
    host_ip: str
    ns_ip: str
    latency_ms: float
    jitter_ms: float


_live_netem: dict[str, NetemLink] = {}  # ns_ip -> link, while netem_link's block runs


def netem_addresses(pid: int, n: int) -> tuple[str, str]:
    """(host end, namespace end) of a /30 in 169.254.0.0/16, distinct per process and link
    (third octet from the pid, skipping 169.254.169.x where clouds keep metadata)."""
    third = pid % 250 + 1
    if third == 169:
        third = 251
    base = (n % 64) * 4
    return f"169.254.{third}.{base + 1}", f"169.254.{third}.{base + 2}"


def netem_delay_args(latency_ms: float, jitter_ms: float) -> list[str]:
    """``netem delay`` arguments for one direction, in whole microseconds."""
    args = ["netem", "delay", f"{round(latency_ms * 1000)}us"]
    if jitter_ms > 0:
        args.append(f"{round(jitter_ms * 1000)}us")
    return args


def netem_commands(
    namespace: str, host_if: str, host_ip: str, ns_ip: str, latency_ms: float, jitter_ms: float
) -> list[list[str]]:
    """The ip and tc command lines that build the delayed veth link (without ``ip``/``tc``
    paths resolved; the first word is the program)."""
    (up_lat, up_jit), (down_lat, down_jit) = split_round_trip(latency_ms, jitter_ms)
    ns_if = "eth0"  # inside the private namespace nothing else has that name
    return [
        ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", namespace],
        ["ip", "addr", "add", f"{host_ip}/30", "dev", host_if],
        ["ip", "link", "set", host_if, "up"],
        ["ip", "-n", namespace, "addr", "add", f"{ns_ip}/30", "dev", ns_if],
        ["ip", "-n", namespace, "link", "set", ns_if, "up"],
        # Egress of the host end: the query on its way to the server.
        ["tc", "qdisc", "add", "dev", host_if, "root", *netem_delay_args(up_lat, up_jit)],
        # Egress of the namespace end: the answer on its way back.
        ["tc", "-n", namespace, "qdisc", "add", "dev", ns_if, "root",
         *netem_delay_args(down_lat, down_jit)],
    ]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    program = shutil.which(argv[0]) or argv[0]
    return subprocess.run(
        [program, *argv[1:]],
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@functools.cache
def netem_probe() -> str | None:
    """None when ``tc qdisc ... netem`` works here, else why not (probed once, in a
    throwaway namespace, so the host's interfaces are never touched)."""
    from servelab.host.netns import NamespaceError, network_namespace, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        return reason
    if shutil.which("tc") is None:
        return "the `tc` program (Debian package iproute2) is not installed"
    try:
        with network_namespace() as namespace:
            done = _run(
                ["tc", "-n", namespace.name, "qdisc", "add", "dev", "lo", "root",
                 *netem_delay_args(1, 0)]
            )
    except NamespaceError as exc:
        return exc.problem
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        return f"this kernel has no netem qdisc (tc: {said[-1] if said else 'failed'})"
    return None


def netem_available() -> bool:
    return netem_probe() is None


def choose_method(link: str) -> Method:
    """The tool for ``link`` ("auto", "netem" or "toxiproxy"); netem asked for where the
    kernel lacks it is a SpecError naming the fix."""
    if link == "toxiproxy":
        return "toxiproxy"
    if netem_available():
        return "netem"
    if link == "netem":
        raise SpecError(f"cannot delay the database link with netem: {netem_probe()}", NETEM_FIX)
    return "toxiproxy"


@contextmanager
def netem_link(latency_ms: float, jitter_ms: float) -> Iterator[NetemLink]:
    """A namespace behind a delaying veth pair, for the server to run in.

    The veth pair lives and dies with the namespace, which network_namespace
    deletes (and the janitor, if servelab is killed).
    """
    from servelab.host.netns import network_namespace

    with network_namespace() as namespace:
        pid, n = (int(part) for part in namespace.name.rsplit("-", 2)[1:])
        host_ip, ns_ip = netem_addresses(pid, n)
        host_if = f"sl{pid}-{n}"[:15]
        for argv in netem_commands(namespace.name, host_if, host_ip, ns_ip, latency_ms, jitter_ms):
            done = _run(argv)
            if done.returncode != 0:
                said = (done.stderr or done.stdout).strip().splitlines()
                raise SpecError(
                    f"cannot build the delayed link: `{' '.join(argv)}` failed: "
                    f"{said[-1] if said else 'no output'}",
                    NETEM_FIX,
                )
        link = NetemLink(namespace, host_if, host_ip, ns_ip, latency_ms, jitter_ms)
        _live_netem[ns_ip] = link
        try:
            yield link
        finally:
            _live_netem.pop(ns_ip, None)


def _tc_version() -> str:
    done = _run(["tc", "-V"])  # "tc utility, iproute2-6.1.0, libbpf 1.1.2"
    for word in done.stdout.replace(",", " ").split():
        if word.startswith("iproute2-"):
            return f"(iproute2 {word.removeprefix('iproute2-')})"
    return ""


# --------------------------------------------------------------------------


@contextmanager
def slow_link(
    target_host: str,
    target_port: int,
    latency_ms: float,
    jitter_ms: float,
    method: Method,
    *,
    cpus: str | None = None,
) -> Iterator[SlowLink]:
    """The address to use instead of ``target_host:target_port`` to get the delay.

    toxiproxy: a proxy in front of the target, stopped and reaped after the block.
    netem delays a link, not a port: the target must already listen at the far
    end of a live ``netem_link`` (its ``ns_ip``), and is used as it is.
    ``cpus`` pins toxiproxy (a taskset list), like the database behind it.
    """
    if method == "toxiproxy":
        with _toxiproxy(target_host, target_port, latency_ms, jitter_ms, cpus) as link:
            yield link
        return
    netem = _live_netem.get(target_host)
    if netem is None:
        raise ValueError(
            f"{target_host} is not behind a netem link; start the server inside netem_link()"
        )
    yield SlowLink(
        target_host, target_port, "netem", _tc_version(), netem.latency_ms, netem.jitter_ms
    )
