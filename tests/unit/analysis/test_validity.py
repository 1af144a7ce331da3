"""Which figure carries a verdict in which design, and what a check's threshold reads."""

from __future__ import annotations

import pytest
from support import FakeExecutor, ListSink

from servelab.analysis.analyze import analyze, threshold_comparison
from servelab.analysis.validity import judged_metric, latency_judged, not_judged_because
from servelab.measuring import Runner
from servelab.prepare.building import experiment_from_dict


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


def _sized(variant, repetition, stack_cpus, driver_cpus):
    from support import fake_run

    return fake_run(variant, "w", repetition, stack_cpus=stack_cpus, driver_cpus=driver_cpus)


@pytest.mark.parametrize(
    ("sets", "own"),
    [
        # (stack, driver) CPUs of the baseline and the variant in each of two rounds
        ((("0-1", "6"), ("2-3", "7")), True),  # 8 CPUs: nothing shared
        ((("0", "1"), ("0", "1")), False),  # 2 CPUs: one stack CPU for all
        ((("0-1", "6"), ("1-2", "7")), False),  # stacks overlap on CPU 1
        ((("0-1", "6"), ("2-3", "6")), False),  # the drivers share CPU 6
        ((("0-1", None), ("2-3", None)), False),  # not pinned: shared with everything
    ],
)
def test_side_by_side_on_cpus_of_their_own_is_judged_as_each_stack_alone(sets, own):
    from servelab.analysis.validity import as_measured, on_own_cpus

    (base_stack, base_driver), (var_stack, var_driver) = sets
    runs = [
        run
        for repetition in (1, 2)
        for run in (
            _sized("base", repetition, base_stack, base_driver),
            _sized("unix", repetition, var_stack, var_driver),
        )
    ]
    assert on_own_cpus(runs) is own
    side = experiment(side_by_side=True)
    judged_in, kept = as_measured(side, runs)
    assert judged_in.side_by_side is not own and len(kept) == len(runs)
    # Requests/s is a share only where CPUs were shared.
    assert (not_judged_because(judged_in, judged_in.workloads[0], "rps") is None) is own


def test_only_stacks_measured_together_in_one_round_need_disjoint_cpus():
    from servelab.analysis.validity import on_own_cpus

    # Round 2 reuses round 1's CPUs (the earlier stacks were stopped): still their own.
    runs = [
        _sized("base", 1, "0-1", "6"), _sized("unix", 1, "2-3", "7"),
        _sized("base", 2, "2-3", "7"), _sized("unix", 2, "0-1", "6"),
    ]
    assert on_own_cpus(runs)
