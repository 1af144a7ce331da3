"""The app's listen (accept) queue, sampled with ``ss`` while a run goes.

For a listening socket ``ss`` shows the connections waiting to be accepted as
Recv-Q and the queue's limit as Send-Q: the effective backlog, i.e.
min(app backlog, net.core.somaxconn of the socket's namespace). Sampling it a
few times a second shows the queue filling up before nginx starts answering
502 (unix socket) or 504 (TCP).

The sampler thread joins the stack's network namespace (``setns``, this thread
only) before it starts; the ``ss`` processes it spawns inherit that namespace,
which is cheaper than ``ip netns exec`` for every sample.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from servelab.host.netns import NetNamespace
from servelab.results.records import ListenQueue

MAX_POINTS = 200  # the series kept in the result is thinned to at most this many


@dataclass(frozen=True)
class QueueSample:
    t: float  # seconds since the sampler started
    queued: int  # Recv-Q
    limit: int  # Send-Q


def ss_command(address: tuple[str, int] | Path) -> list[str]:
    program = shutil.which("ss") or "ss"
    if isinstance(address, Path):
        return [program, "-H", "-l", "-x", "-n"]
    return [program, "-H", "-l", "-t", "-n", f"sport = :{address[1]}"]


def parse_ss(output: str, address: tuple[str, int] | Path) -> tuple[int, int] | None:
    """(Recv-Q, Send-Q) of the listening socket at ``address`` in ``ss -H -l`` output."""
    for line in output.splitlines():
        fields = line.split()
        if isinstance(address, Path):
            # u_str LISTEN 3 7 /path inode * 0
            if len(fields) >= 5 and fields[0] == "u_str" and fields[4] == str(address):
                return int(fields[2]), int(fields[3])
        else:
            # LISTEN 0 9 127.0.0.1:5555 0.0.0.0:*
            if len(fields) >= 4 and fields[0] == "LISTEN" and fields[3].endswith(f":{address[1]}"):
                return int(fields[1]), int(fields[2])
    return None


class AcceptQueueSampler:
    """``with AcceptQueueSampler(address, netns) as q: ...``; then ``q.summary()``."""

    def __init__(
        self,
        address: tuple[str, int] | Path,
        netns: NetNamespace | None = None,
        interval_s: float = 0.1,
    ) -> None:
        self.address = address
        self.netns = netns
        self.interval_s = interval_s
        self.samples: list[QueueSample] = []
        self.error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="servelab-acceptq", daemon=True)

    def _loop(self) -> None:
        try:
            if self.netns is not None:
                self.netns.enter_current_thread()
        except Exception as exc:
            self.error = str(exc)
            return
        argv = ss_command(self.address)
        start = time.monotonic()
        while True:
            self.sample_once(argv, start)
            if self._stop.wait(self.interval_s):
                break
        self.sample_once(argv, start)

    def sample_once(self, argv: list[str], start: float) -> None:
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.error = str(exc)
            return
        found = parse_ss(done.stdout, self.address)
        if found is not None:
            self.samples.append(QueueSample(time.monotonic() - start, *found))

    def __enter__(self) -> AcceptQueueSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def summary(self) -> ListenQueue | None:
        if not self.samples:
            return None
        queued = [s.queued for s in self.samples]
        limit = max(s.limit for s in self.samples)
        step = max(1, -(-len(self.samples) // MAX_POINTS))
        series = tuple((round(s.t, 3), s.queued) for s in self.samples[::step])
        return ListenQueue(
            address=f"unix:{self.address}"
            if isinstance(self.address, Path)
            else "{}:{}".format(*self.address),
            backlog=limit,
            max_queued=max(queued),
            mean_queued=sum(queued) / len(queued),
            samples=len(queued),
            full_samples=sum(1 for s in self.samples if s.queued >= s.limit),
            series=series,
        )
