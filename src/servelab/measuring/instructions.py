"""The app's instructions per request, counted by valgrind's cachegrind: a figure this
machine's speed does not move.

On a small shared VM a second of CPU buys 10-16 % more or less work from one second to
the next (docs/validation/bisect-history.md), so a check of CPU per request needs minutes
to see a few percent.
Counting executed instructions instead (as CodSpeed and iai-callgrind do for code
benchmarks on CI runners) gives the same figure to a tenth of a percent in a few
seconds. It sees the app's own work only: the request is served in one process with no
server (``instruction_probe.py``, in the app's own Python), so nginx, the app server,
I/O waits and contention are not in it. What it is for: a change of the app's code that
costs CPU (a check, a bisect), not the stack's speed.

Start-up and first-request costs cancel: the count of ``WARM + MEASURED`` requests minus
the count of ``WARM`` requests, divided by ``MEASURED``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from servelab.apps import ResolvedApp, app_environment
from servelab.config.load import RequestSpec
from servelab.errors import SpecError
from servelab.host.paths import require_program

PROBE = Path(__file__).with_name("instruction_probe.py")
WARM_REQUESTS = 3
MEASURED_REQUESTS = 20
RUN_TIMEOUT_S = 600.0  # one counted run: Python under cachegrind is 20-100x slower
_FIX = "run `servelab setup` (it installs valgrind; or apt-get install valgrind)"


@dataclass(frozen=True)
class Count:
    """One version's instructions per request, from one pair of counted runs."""

    per_request: float
    statuses: tuple[int, ...]  # every status the app answered in the measured runs


def summary_count(cachegrind_out: str) -> int:
    """The total instruction count (``summary:``) of a cachegrind output file's text."""
    for line in cachegrind_out.splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise ValueError("no 'summary:' line in cachegrind's output")


def per_request(warm_only: int, warm_and_measured: int, measured: int) -> float:
    """Instructions per measured request: the difference of the two runs' counts."""
    if measured < 1:
        raise ValueError("at least one measured request")
    return (warm_and_measured - warm_only) / measured


def valgrind() -> str:
    """valgrind's path (MissingToolError, one line and exit 3, where it is not installed)."""
    return require_program("valgrind", _FIX)


def probe_request(request: RequestSpec) -> dict[str, object]:
    headers = dict(request.headers)
    if request.body is not None:
        headers.setdefault("Content-Type", request.content_type)
    return {"method": request.method, "path": request.path,
            "headers": sorted(headers.items()), "body": request.body or ""}


def count_run(
    app: ResolvedApp, env: dict[str, str], request: RequestSpec, requests: int
) -> tuple[int, tuple[int, ...]]:
    """Instructions of one run of the probe serving ``requests`` requests, and the
    statuses it answered. Hash randomisation is fixed so that two runs execute alike."""
    ask = {"app": app.import_path, "interface": app.interface, "factory": app.is_factory,
           "requests": requests, **probe_request(request)}
    environment = {**app_environment(env, app.app_dir, app.python), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory(prefix="servelab-cachegrind-") as tmp:
        out = Path(tmp) / "cachegrind.out"
        command = [valgrind(), "-q", "--tool=cachegrind", "--cache-sim=no", "--branch-sim=no",
                   f"--cachegrind-out-file={out}", app.interpreter, str(PROBE), json.dumps(ask)]
        try:
            done = subprocess.run(command, env=environment, cwd=app.app_dir or os.getcwd(),
                                  capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise SpecError(
                f"counting {requests} requests under valgrind took over {RUN_TIMEOUT_S:g} s",
                "count instructions of a lighter request (--path), or use an rps threshold",
            ) from None
        if done.returncode != 0 or not out.exists():
            tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise SpecError(f"the app did not serve the request under valgrind: {tail}",
                            "check that the request works (servelab check without "
                            "instructions thresholds says how it answers)",
                            detail=done.stderr[-4000:])
        statuses = tuple(json.loads(done.stdout.strip().splitlines()[-1])["statuses"])
        return summary_count(out.read_text()), statuses


def count(app: ResolvedApp, env: dict[str, str], request: RequestSpec) -> Count:
    """The app's instructions per request: two counted runs (warm-up only, warm-up and
    the measured requests)."""
    warm, _ = count_run(app, env, request, WARM_REQUESTS)
    both, statuses = count_run(app, env, request, WARM_REQUESTS + MEASURED_REQUESTS)
    return Count(per_request(warm, both, MEASURED_REQUESTS), statuses)
