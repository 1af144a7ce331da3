"""What a launched stack looks like to the rest of servelab."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from servelab.config.stack import StackSpec
from servelab.host.netns import Placement
from servelab.host.procs import ManagedProcess


@dataclass
class RunningStack:
    """A stack that answered its readiness request; valid inside ``launch_stack``."""

    spec: StackSpec
    base_url: str  # e.g. "http://127.0.0.1:41234" — where the load driver connects
    workdir: Path  # the stack's temporary directory (configs, sockets, logs)
    processes: dict[str, ManagedProcess] = field(default_factory=dict)  # role -> process
    # Where it runs (host network or its own namespace) and where the app listens.
    placement: Placement = field(default_factory=lambda: Placement(None, None))
    app_address: tuple[str, int] | Path | None = None

    def url(self, path: str) -> str:
        return self.base_url + path

    def log_tails(self, lines: int = 20) -> dict[str, str]:
        return {role: proc.log_tail(lines) for role, proc in self.processes.items()}
