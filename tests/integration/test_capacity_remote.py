"""`servelab capacity --driver locust` with its Locust worker on another machine: two
network namespaces made here and joined by a veth pair (tests/support ``two_machines``),
the capacity search (stack and Locust's master, ``--listen`` on its end) in one and
``servelab locust-worker`` in the other. Its own module, so that it runs beside
test_locust_remote.py's long test (pytest-xdist's loadscope keeps a module on one
worker). Skipped only where network namespaces cannot be made (not root, no ``ip``)."""

from __future__ import annotations

import json
import os
import sys

import pytest
from support import (
    LOCUST_ACROSS_NAMESPACES,
    ctrl_c,
    namespace_pids,
    sleepy_capacity_bound,
    start_logged,
    two_machines,
    unused_subnet,
)

from servelab.capacity.slo import parse_slo
from servelab.capacity.trials import Trial

# Alone: its trials' p99 at one sleeping worker is what the test reads, and beside the
# other tests on this 2-CPU VM (2026-11-29, three fresh-clone runs) the edge read low
# twice and a trial sent late once.
pytestmark = [pytest.mark.integration, pytest.mark.alone, *LOCUST_ACROSS_NAMESPACES]


def test_capacity_trials_sent_from_another_machine_find_the_known_capacity(tmp_path):
    """`servelab capacity --driver locust` with its Locust worker on the other machine
    (issue 35, item 6): every trial sent on the built-in scenario's schedule, at the rate
    asked within 1 % (checked by the trial's own rule), the machine that sent it named
    with its rate in trials.jsonl, capacity.md and the console; the search's estimate
    near the capacity of one sync worker sleeping 20 ms a request
    (tests/integration/test_capacity.py's stack), on one start of it (--one-start: the
    schedule is what this test is for; a fresh start per trial, test_capacity's)."""
    servelab = [sys.executable, "-m", "servelab"]
    results = tmp_path / "results"
    if unused_subnet() is None:
        pytest.skip("no free 10.213.N.0/30 for the test's veth pair")
    env = {**os.environ, "SERVELAB_SLEEP_S": "0.02"}
    with two_machines("slcap") as (study_ns, study_addr, worker_ns, _):
        worker = start_logged(
            ["ip", "netns", "exec", worker_ns, *servelab, "locust-worker", "--master-host",
             study_addr, "--processes", "1", "--name", "machine-b"],
            tmp_path / "worker.log", tmp_path, env,
        )
        study = None
        try:
            study = start_logged([
                "nsenter", f"--net=/run/netns/{study_ns}", *servelab, "capacity",
                "--app", "servelab.apps.sleepy_wsgi:app", "--workers", "1",
                "--slo", "p99<200ms,errors<1%", "--trial-seconds", "3", "--max-trials", "8",
                "--one-start", "--half-width", "10", "--connections", "200", "--driver", "locust",
                "--expect-workers", "1", "--expect-workers-timeout", "30",
                "--listen", study_addr, "--results", str(results),
            ], tmp_path / "study.log", tmp_path, env)
            status = study.wait(240)
            study_log = (tmp_path / "study.log").read_text()
            assert status == 0, study_log[-3000:] + (tmp_path / "worker.log").read_text()[-2000:]
            assert namespace_pids(study_ns) == []
        finally:
            if study is not None and study.poll() is None:
                ctrl_c(study)
            assert ctrl_c(worker) == 130, (tmp_path / "worker.log").read_text()
        assert namespace_pids(worker_ns) == []
    [directory] = results.glob("capacity-*")
    trials = [json.loads(line) for line in (directory / "trials.jsonl").read_text().splitlines()]
    assert trials and all(not t["problems"] for t in trials), trials
    slo = parse_slo("p99<200ms,errors<1%")
    for trial in trials:
        assert list(trial["delivered"]) == ["machine-b"], trial
        assert trial["delivered"]["machine-b"] == pytest.approx(trial["send_rate"])
        # The schedule's own count, 3 s by the worker's clock from its first send: the
        # master times the run from the worker's spawning complete (not its own start)
        # and a late stop message adds no sends.
        assert 0.97 * 3.0 * trial["rate"] <= trial["sent"] <= 3.0 * trial["rate"] + 1, trial
        if Trial.from_dict(trial).outcome(slo).held:
            # Sent on time (the trial's own rule, checked again here): within 1 % of the
            # rate asked, over the schedule's length (seconds = sent / send_rate: one
            # period more than first to last send). A broken trial may have sent late
            # (its rule: it broke at what it sent, so it breaks at the rate asked; in CI
            # one at 53.3 req/s sent at 51.1 beside two other tests).
            assert abs(trial["send_rate"] / trial["rate"] - 1) <= 0.01, trial
            assert 2.9 <= trial["seconds"] <= 3.0 * (1 + 1 / trial["sent"]) + 0.01, trial
    # Where the trials sent from the other machine held and broke: near what one worker
    # serves (50 a second). Not the interval, nor the rate held in 9 trials of 10: 8
    # trials beside other tests leave the holding curve's tail loose (in CI: 23 req/s
    # with no interval yet, the half point 44); the interval holding a known capacity is
    # tests/integration/test_capacity.py's.
    [variant] = json.loads((directory / "capacity.json").read_text())["variants"]
    held, broke = variant["highest_held_rps"], variant["lowest_broken_rps"]
    assert held is not None and broke is not None, study_log
    bound = sleepy_capacity_bound(0.02, 0.2, 3.0)  # 53: a 3 s trial's queue stays short
    assert min(held, broke) >= 0.75 * 50 and max(held, broke) <= 1.5 * bound, study_log
    assert variant["highest_held_rps"] < bound and variant["lowest_broken_rps"] > 37, study_log
    assert "(machine-b " in (directory / "capacity.md").read_text()
    assert "sent by machine-b" in study_log
