"""Switched passes for real (``switching``): oha kept running per stack, stopped while
the other stacks drive, for every pass of a workload; each slice's answers counted from
the driver's own record, the stack's CPU read at the ends of each counted part, and
nothing left behind (no driver, stopped or not)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console
from support import owned_by

import servelab
from servelab.measuring.switching import SETTLE_S, SWITCH_S, TAIL_S
from servelab.prepare.building import experiment_from_dict
from servelab.studies.seeds import SEED_ITEM_BODY

pytestmark = pytest.mark.integration

REQUEST = {"method": "POST", "path": "/sync/items/", "body": SEED_ITEM_BODY}
EXPERIMENT = {
    "name": "switched",
    "repetitions": 1,
    "slices": 2,
    "switching": True,
    "warmup": {"duration_s": 1.0},
    "baseline": {
        "name": "tcp", "app": {"ref": "fastapi"},
        "server": {"kind": "gunicorn", "worker_class": "uvicorn", "workers": 1},
        "proxy": {"kind": "nginx", "transport": "tcp"},
    },
    "variants": [{"name": "unix", "proxy": {"transport": "unix"}}],
    # Cheap enough to drain 10 requests in flight within the settle time: switched (a
    # workload that does not is left to the runner's unit tests: tests/unit/measuring).
    "workloads": [{"name": "small", "request": REQUEST,
                   "load": {"concurrency": 10, "duration_s": 2}}],
}


def test_switched_slices_count_each_turn_and_leave_no_driver(tmp_path: Path) -> None:
    said = io.StringIO()
    result = servelab.measure(
        experiment_from_dict(EXPERIMENT, source="test"),
        servelab.RunOptions(results_dir=tmp_path / "results"),
        console=Console(file=said, width=400),
    )
    runs = {(r.workload, r.variant, r.repetition): r for r in result.runs}
    assert len(runs) == 2
    counted_s = 2 * (SWITCH_S - SETTLE_S - TAIL_S)  # a 1 s slice: two turns' counted parts
    for run in runs.values():
        assert run.switched is True, said.getvalue()
        # Warmed up in switched turns too (two 0.5 s turns of the 1 s round, counted
        # as the passes' are), its rate what decided the passes.
        assert run.warmup_rps and run.warmup_rps[0] > 100 and run.warmup_requests > 50
        assert [s.pass_number for s in run.slice_figures] == [1, 2]
        for piece in run.slice_figures:
            assert piece.requests > 50 and not piece.errors
            assert 0 < piece.latency_p50_ms <= piece.latency_p99_ms
            assert piece.stack_cpu_s > 0
            if run.switched:
                # The counted parts, as timed: the CPU reading at the start of each takes
                # a few ms of it, and sleeps end late; beside other tests a reading can
                # take a turn's most (CI stop 51: 0.36 s of 0.66), never add to it.
                assert counted_s / 2 <= piece.duration_s < counted_s + 0.04
                # The stack was busy in its counted part: its CPU is most of that time
                # (one CPU for the stack), not the whole pass's.
                assert 0.3 * piece.duration_s < piece.stack_cpu_s < 1.2 * piece.duration_s
    assert "small: passes switched between the stacks every 0.5 s" in said.getvalue()
    # No driver left, stopped or running, nor anything else this process started.
    assert owned_by(os.getpid()) == []
