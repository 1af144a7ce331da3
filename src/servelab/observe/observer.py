"""What servelab watches beside the load driver while one run is measured.

The logs of every process of the stack (classified into failure causes, see
``servelab.observe.attribution``) and the app's listen queue (``servelab.observe.acceptq``),
plus where the stack ran (namespace, somaxconn, effective backlog). The
runner wraps its measured load in :class:`RunObserver` and adds
:meth:`RunObserver.result_fields` to the run's result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servelab.host.running import RunningStack
from servelab.observe.acceptq import AcceptQueueSampler
from servelab.observe.attribution import ACCESS_LOG_NAME, LogCursor, LogEvents

FAST_SAMPLING_S = 0.1
SLOW_SAMPLING_S = 0.5


def effective_backlog(app_backlog: int, somaxconn: int | None) -> int:
    """The listen queue the kernel gives the app: its backlog, capped at somaxconn."""
    return app_backlog if somaxconn is None else min(app_backlog, somaxconn)


class RunObserver:
    """``with RunObserver(stack) as seen: run the load``; then ``seen.result_fields()``."""

    def __init__(self, stack: RunningStack, *, sample_queue: bool = True) -> None:
        self.stack = stack
        self.cursor: LogCursor | None = None
        self.events = LogEvents.empty()
        # ss costs ~2.5 ms of CPU on the driver's core per sample: ten a second where the
        # queue is the point (somaxconn studies), two a second elsewhere.
        interval = FAST_SAMPLING_S if stack.spec.network.somaxconn else SLOW_SAMPLING_S
        self.sampler = (
            AcceptQueueSampler(stack.app_address, stack.placement.namespace, interval)
            if sample_queue and stack.app_address is not None
            else None
        )
        # nginx's access log (the access_log knob): the window's requests by client.
        self.access_log = (
            stack.workdir / ACCESS_LOG_NAME if stack.spec.proxy.access_log else None
        )
        self.access_from = 0
        self.by_client: dict[str, int] = {}

    def __enter__(self) -> RunObserver:
        self.cursor = LogCursor(
            {role: proc.log_path for role, proc in self.stack.processes.items()}
        )
        if self.access_log is not None:
            self.access_from = _size(self.access_log)
        if self.sampler is not None:
            self.sampler.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.sampler is not None:
            self.sampler.__exit__(*exc)
        if self.cursor is not None:
            self.events = self.cursor.events()
        if self.access_log is not None:
            self.by_client = clients_in(self.access_log, self.access_from)

    def result_fields(self) -> dict[str, Any]:
        """Keyword arguments for ``RunRecord``: log events, placement, listen queue."""
        placement = self.stack.placement
        notes = [placement.note] if placement.note else []
        if self.sampler is not None and self.sampler.error:
            notes.append(f"listen queue not sampled: {self.sampler.error}")
        return {
            "log_events": dict(self.events.counts),
            "log_examples": dict(self.events.examples),
            "namespace": placement.namespace.name if placement.namespace else None,
            "somaxconn": placement.somaxconn,
            "listen_backlog": effective_backlog(
                self.stack.spec.server.backlog, placement.somaxconn
            ),
            "listen_queue": self.sampler.summary() if self.sampler is not None else None,
            "notes": tuple(notes),
            **(
                {"front_requests_by_client": dict(self.by_client)}
                if self.access_log is not None else {}
            ),
        }


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def clients_in(access_log: Path, offset: int) -> dict[str, int]:
    """Requests by client address in ``access_log`` (nginx's combined format, whose
    first field is ``$remote_addr``) from byte ``offset`` on: the lines written since
    then."""
    counts: dict[str, int] = {}
    try:
        with access_log.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
    except OSError:
        return counts
    for line in text.splitlines():
        address = line.split(maxsplit=1)[0] if line.strip() else ""
        if address:
            counts[address] = counts.get(address, 0) + 1
    return dict(sorted(counts.items()))
