"""How the runs were measured, in sentences: the report's "How it was measured" section.

Only what the environment table does not say already (the machine, the load
driver and the CPU placement are there): repetitions and warm-up, slices, the
stopping rule, and what "time per request" means.
"""

from __future__ import annotations

from servelab.analysis.stats import MIN_CLEAR_DF
from servelab.config.experiment import Experiment


def method_notes(experiment: Experiment) -> list[str]:
    return [
        f"Repetitions: {experiment.repetitions}, each on a freshly started stack, "
        f"variants {experiment.order}; before each run, warm-up rounds of "
        f"{warmup_size(experiment)} until requests/s settles within "
        f"{experiment.warmup.settle_pct:g} % (at most {experiment.warmup.max_rounds}), discarded",
        *([sliced_note(experiment)] if experiment.slices > 1 else []),
        *([stopping_note(experiment)] if experiment.stopping is not None else []),
        "Time per request is the mean latency the driver measured (closed model: "
        "concurrency / throughput, as ab reports it).",
    ]


def warmup_size(experiment: Experiment) -> str:
    if experiment.warmup.duration_s is not None:
        return f"{experiment.warmup.duration_s:g} s at the workload's concurrency"
    return f"{experiment.warmup.requests} requests"


def sliced_note(experiment: Experiment) -> str:
    slices = experiment.slices
    if experiment.side_by_side:
        return (
            f"Side by side: each round's stacks (one per variant) were measured at the same "
            f"time, {slices} slices each, one load driver per stack: every variant saw the "
            "same moments of the machine, so its drift cancels in the ratios. Where the "
            "stacks shared the stack CPUs (the environment's plan says), figures are each "
            "stack's share of them (compare ratios), and effects that need a CPU to "
            "themselves can read smaller than in turns (--in-turns); on CPU sets of their "
            "own they are each stack's own"
        )
    return (
        f"Slices: each run measured in {slices} slices, interleaved with every other "
        "run's, all the runs' stacks alive at once: drift of the machine's own speed falls "
        "on every run alike, so the spread between repetitions is the stacks' own, and "
        "the absolute figures are an average over the whole measuring time"
        + (switched_note() if experiment.switching else "")
    )


def switched_note() -> str:
    from servelab.measuring.switching import SETTLE_S, SWITCH_S, TAIL_S

    counted = SWITCH_S - SETTLE_S - TAIL_S
    return (
        f". Switched (where the stacks drain a stopped driver's requests in flight within "
        f"{SETTLE_S:g} s; the runs say which): a load driver per stack kept running through "
        f"a workload's passes and stopped but in its stack's turns of {SWITCH_S:g} s, each "
        f"turn counted from {SETTLE_S:g} s after the switch for {counted:.2f} s; latencies "
        "from requests sent and answered within a turn, weighted by the inverse of their "
        "chance to be seen (longer ones are seen less often)"
    )


def stopping_note(experiment: Experiment) -> str:
    stopping = experiment.stopping
    assert stopping is not None
    return (
        f"Stopping: rounds of fresh starts added until every comparison of the answer's "
        f"metric is clear (its 95 % interval within ±{stopping.precision_pct:g} % on at "
        f"least {MIN_CLEAR_DF} degrees of freedom, or its 99.9 % interval beyond "
        f"±{stopping.min_effect_pct:g} %: stopping on precision, not on significance, keeps "
        f"the intervals' coverage), within {stopping.budget_s:g} s of measuring; verdicts "
        "Holm-adjusted over the experiment's comparisons of each metric"
    )
