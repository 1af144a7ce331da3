"""Runs measured in interleaved slices: cutting the load, merging the slices back into one
run (hand-computed), the order of the passes, blocks of live stacks, bad input."""

from __future__ import annotations

import random

import pytest
from support import fake_load

from servelab.config.building import slicing_problem
from servelab.config.load import LoadSpec
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.measuring.plan import Launch, launch_blocks, slice_order
from servelab.measuring.slices import (
    merge_listen_queues,
    merge_loads,
    merge_observed,
    merge_usage,
    percentile,
    slice_loads,
    weighted_share,
)
from servelab.prepare.building import experiment_from_dict
from servelab.results.database import spec_hash
from servelab.results.records import ListenQueue, LoadMachine, LoadMeasurement, ProcessUsage


def measurement(requests: int, duration_s: float, **extra) -> LoadMeasurement:
    # latencies deliberately wrong (99 ms): merged figures come from the latencies
    return fake_load(rps=requests / duration_s, duration_s=duration_s, requests=requests,
                     mean_ms=99.0, p99_ms=99.0, latency_max_ms=99.0, latency_p90_ms=99.0,
                     bytes_received=10 * requests, **extra)


def test_a_duration_is_cut_into_equal_slices_and_a_count_into_parts_that_add_up():
    by_time = slice_loads(LoadSpec(concurrency=10, duration_s=10), 4)
    assert [part.duration_s for part in by_time] == [2.5] * 4
    by_count = slice_loads(LoadSpec(concurrency=10, requests=1003), 4)
    assert [part.requests for part in by_count] == [251, 251, 251, 250]
    assert slice_loads(LoadSpec(concurrency=1, requests=7), 1)[0].requests == 7


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 11)]  # 1..10
    assert percentile(values, 50) == 5.0
    assert percentile(values, 90) == 9.0
    assert percentile(values, 99) == 10.0
    assert percentile(values, 0) == 1.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([], 50) == 0.0
    assert percentile([2.0, 2.0, 2.0, 7.0], 50) == 2.0  # ties
    # The 999th of 1,000 (99.9 / 100 * 1000 is not exactly 999 in floating point).
    assert percentile([float(v) for v in range(1, 1001)], 99.9) == 999.0


def test_merged_load_adds_counts_and_takes_latencies_from_every_request():
    first = measurement(
        300, 2.0, status_counts={"200": 290, "502": 10}, connection_errors={"reset": 2},
        driver_cpu_s=0.5, driver_peak_rss_bytes=1000, slow_requests=3,
    )
    second = measurement(
        100, 2.0, status_counts={"200": 99, "504": 1}, connection_errors={"reset": 1,
        "timeout": 4}, driver_cpu_s=0.25, driver_peak_rss_bytes=3000, slow_requests=1,
    )
    latencies = [1.0, 2.0, 3.0, 4.0, 10.0]
    merged = merge_loads([first, second], latencies)
    assert merged.requests_total == 400
    assert merged.duration_s == 4.0
    assert merged.rps == 100.0  # 400 requests in 4 s, not the mean of 150 and 50 req/s
    assert merged.status_counts == {"200": 389, "502": 10, "504": 1}
    assert merged.connection_errors == {"reset": 3, "timeout": 4}
    assert merged.bytes_received == 4000
    assert merged.latency_mean_ms == 4.0
    assert merged.latency_p50_ms == 3.0
    assert merged.latency_p90_ms == 10.0
    assert merged.latency_max_ms == 10.0
    assert merged.driver_cpu_s == 0.75
    assert merged.driver_peak_rss_bytes == 3000
    assert merged.slow_requests == 4


def test_one_slice_is_the_run_itself_and_unknown_slow_counts_stay_unknown():
    only = measurement(50, 1.0)
    assert merge_loads([only], [5.0]) is only
    merged = merge_loads([measurement(50, 1.0), measurement(50, 1.0, slow_requests=2)], [1.0])
    assert merged.slow_requests is None


def test_nothing_answered_gives_zero_latencies_not_an_error():
    merged = merge_loads([measurement(0, 1.0, status_counts={}), measurement(0, 1.0,
                          status_counts={})], [])
    assert (merged.rps, merged.latency_p99_ms, merged.latency_max_ms) == (0.0, 0.0, 0.0)


def test_load_machines_add_their_requests_over_the_slices():
    b1 = LoadMachine(machine="b", processes=2, requests=100, cpu_max_pct=50.0)
    c1 = LoadMachine(machine="c", processes=1, requests=40, cpu_max_pct=95.0, cpu_warning=True)
    b2 = LoadMachine(machine="b", processes=2, requests=120, cpu_max_pct=70.0)
    merged = merge_loads(
        [measurement(140, 1.0, machines=(b1, c1)), measurement(120, 1.0, machines=(b2,))], [1.0]
    )
    assert [(m.machine, m.processes, m.requests, m.cpu_max_pct, m.cpu_warning)
            for m in merged.machines] == [("b", 2, 220, 70.0, False), ("c", 1, 40, 95.0, True)]


def test_usage_adds_cpu_per_process_and_keeps_the_highest_peak():
    a1 = ProcessUsage(role="app", pid=10, name="gunicorn", cpu_s=1.25, peak_rss_bytes=100)
    n1 = ProcessUsage(role="nginx", pid=5, name="nginx", cpu_s=0.5, peak_rss_bytes=50)
    a2 = a1.model_copy(update={"cpu_s": 0.75, "peak_rss_bytes": 80})
    merged = merge_usage([(a1, n1), (a2,)])
    assert [(p.pid, p.cpu_s, p.peak_rss_bytes) for p in merged] == [(5, 0.5, 50), (10, 2.0, 100)]


def test_listen_queues_are_laid_end_to_end():
    q1 = ListenQueue(address="u", backlog=64, max_queued=3, mean_queued=1.0, samples=4,
                     full_samples=0, series=((0.0, 1), (1.0, 3)))
    q2 = ListenQueue(address="u", backlog=64, max_queued=64, mean_queued=4.0, samples=2,
                     full_samples=1, series=((0.5, 64),))
    merged = merge_listen_queues([q1, None, q2], [2.0, 2.0, 2.0])
    assert merged is not None
    assert (merged.max_queued, merged.samples, merged.full_samples) == (64, 6, 1)
    assert merged.mean_queued == pytest.approx((4 * 1.0 + 2 * 4.0) / 6)
    assert merged.series == ((0.0, 1), (1.0, 3), (4.5, 64))
    assert merge_listen_queues([None, None], [1.0, 1.0]) is None


def test_observed_fields_add_log_counts_keep_first_examples_and_notes_once():
    part = {"log_events": {"upstream_refused": 2}, "log_examples": {"upstream_refused": "a"},
            "namespace": None, "somaxconn": None, "listen_backlog": 64, "listen_queue": None,
            "notes": ("n",)}
    other = {**part, "log_events": {"upstream_refused": 1, "timeout": 1},
             "log_examples": {"upstream_refused": "b", "timeout": "t"}}
    merged = merge_observed([part, other], [1.0, 1.0])
    assert merged["log_events"] == {"upstream_refused": 3, "timeout": 1}
    assert merged["log_examples"] == {"upstream_refused": "a", "timeout": "t"}
    assert merged["notes"] == ("n",)


def test_neighbour_share_is_weighted_by_slice_time():
    assert weighted_share([0.1, None, 0.4], [1.0, 5.0, 3.0]) == pytest.approx(0.325)
    assert weighted_share([None], [1.0]) is None


def test_passes_rotate_the_order_or_shuffle_it_reproducibly():
    members = ["a", "b", "c"]
    assert [slice_order(members, k, None) for k in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"],
    ]
    first = [slice_order(members, k, random.Random(7)) for k in range(3)]
    again = [slice_order(members, k, random.Random(7)) for k in range(3)]
    assert first == again
    assert all(sorted(order) == members for order in first)


def test_live_stacks_come_in_blocks_of_whole_rounds():
    stack = StackSpec()
    launches = [Launch(r, stack) for r in (1, 1, 1, 2, 2, 2, 3, 3, 3)]
    blocks = launch_blocks(launches, limit=6)
    assert [[launch.repetition for launch in block] for block in blocks] == [
        [1, 1, 1, 2, 2, 2], [3, 3, 3],
    ]
    big_round = [Launch(1, stack)] * 5
    assert len(launch_blocks(big_round, limit=2)) == 1  # a round is never split


def sliced(slices: int, **extra) -> dict:
    return {
        "name": "s",
        "slices": slices,
        "baseline": {"name": "A"},
        "workloads": [{"name": "w", "request": {"path": "/"},
                       "load": {"concurrency": 10, "duration_s": 10}}],
        **extra,
    }


def test_slicing_problems_are_named():
    assert slicing_problem(LoadSpec(concurrency=10, duration_s=3), 5) is not None
    assert "open-model" in (slicing_problem(
        LoadSpec(concurrency=10, duration_s=10, model="open", rate=100), 2) or "")
    assert slicing_problem(LoadSpec(concurrency=100, requests=150), 2) is not None
    assert slicing_problem(LoadSpec(concurrency=10, duration_s=10), 5) is None
    with pytest.raises(SpecError, match="under 1 s each"):
        experiment_from_dict(sliced(20))
    with pytest.raises(SpecError, match="oha"):
        experiment_from_dict(sliced(2, driver="wrk"))


def test_unsliced_experiments_keep_the_hash_they_had_before_slices_existed():
    one = experiment_from_dict(sliced(1))
    data = one.model_dump(mode="json")
    assert data.pop("slices") == 1
    # Fields added later still, at the defaults that measure as before.
    assert data.pop("side_by_side") is False
    assert data.pop("stopping") is None
    assert data["warmup"].pop("duration_s") is None
    for stack in (data["baseline"], *data["variants"]):
        assert stack["app"].pop("python") is None
        assert stack["proxy"].pop("access_log") is False
    assert data.pop("driver_options") == {}
    assert data.pop("switching") is False
    for workload in data["workloads"]:
        assert workload.pop("replay") is None
        assert workload["load"].pop("schedule") is None
        assert workload["load"].pop("speed") == 1.0
    data["seed"] = data.pop("order_seed")  # renamed since
    import hashlib
    import json

    before = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    assert spec_hash(one) == before
    assert spec_hash(experiment_from_dict(sliced(2))) != before


def test_usage_adds_system_time_where_every_slice_recorded_it():
    a1 = ProcessUsage(role="app", pid=10, name="w", cpu_s=1.0, peak_rss_bytes=1, system_s=0.25)
    a2 = a1.model_copy(update={"cpu_s": 0.5, "system_s": 0.125})
    [merged] = merge_usage([(a1,), (a2,)])
    assert (merged.cpu_s, merged.system_s) == (1.5, 0.375)
    [unknown] = merge_usage([(a1,), (a2.model_copy(update={"system_s": None}),)])
    assert unknown.system_s is None  # a stored record's: not known, not 0
