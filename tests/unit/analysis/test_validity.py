"""Which figure carries a verdict in which design, and what a check's threshold reads."""

from __future__ import annotations

import pytest
from support import FakeExecutor, ListSink

from servelab.analysis.analyze import analyze
from servelab.analysis.validity import (
    judged_metric,
    latency_judged,
    not_judged_because,
    threshold_comparison,
)
from servelab.config.building import experiment_from_dict
from servelab.measuring import Runner


def experiment(*, side_by_side: bool = False, load: dict | None = None):
    return experiment_from_dict(
        {
            "name": "validity",
            "repetitions": 3,
            "baseline": {"name": "base"},
            "variants": [{"name": "unix", "proxy": {"transport": "unix"}}],
            "workloads": [
                {"name": "w", "request": {"path": "/"}, "load": load or {"duration_s": 4.0}}
            ],
            **({"side_by_side": True} if side_by_side else {}),
        },
        source="test",
    )


@pytest.mark.parametrize(
    ("side_by_side", "load", "metric", "judged"),
    [
        (True, None, "rps_per_cpu", True),
        (True, None, "errors", True),
        (True, None, "rps", False),  # a share of the shared CPUs
        (True, None, "latency_p99_ms", False),
        (False, None, "rps", True),
        (False, None, "latency_mean_ms", False),  # closed model: concurrency / requests/s
        (False, None, "latency_p99_ms", False),
        (False, {"model": "open", "rate": 100, "duration_s": 4.0}, "latency_p99_ms", True),
    ],
)
def test_which_metric_is_judged(side_by_side, load, metric, judged):
    exp = experiment(side_by_side=side_by_side, load=load)
    assert (not_judged_because(exp, exp.workloads[0], metric) is None) is judged


def test_latency_is_judged_only_at_a_fixed_rate_in_turns():
    assert not latency_judged(experiment())
    assert not latency_judged(experiment(side_by_side=True))
    assert latency_judged(experiment(load={"model": "open", "rate": 100, "duration_s": 4.0}))


def test_a_threshold_on_requests_per_second_reads_the_judged_figure():
    side = experiment(side_by_side=True)
    assert judged_metric(side, side.workloads[0], "rps") == "rps_per_cpu"
    assert judged_metric(side, side.workloads[0], "latency_p99_ms") is None
    turns = experiment()
    assert judged_metric(turns, turns.workloads[0], "rps") == "rps"
    runs = Runner(side, ListSink(), FakeExecutor()).run()
    (variant,) = [v for v in analyze(side, runs).variants if not v.is_baseline]
    assert threshold_comparison(side, variant, "rps") is variant.comparisons["rps_per_cpu"]
    assert threshold_comparison(side, variant, "latency_p99_ms") is None
