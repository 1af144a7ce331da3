"""Which figure may carry a verdict in which design (validity before precision).

A figure gets "better"/"worse" only from a design where it is the stack's own
behaviour (docs/statistics.md, "Which figure carries a verdict"):

- side by side, the stacks share the stack CPUs: a stack's requests/s is its
  share of them and its latency includes waiting for the others, so only
  requests per CPU second (and error counts) are judged; side by side on CPU sets
  of their own (stacks and drivers, ``host.cpus.plan_side_by_side`` on bigger
  machines) each stack's figures are its own, judged as in turns;
- with a closed load model (N clients, each waiting for its answer) the mean
  latency is N / requests/s, nothing beyond requests/s, and every percentile is
  closed-loop (coordinated omission): latency is judged only at a fixed arrival
  rate (the open model), measured in turns.

Pure: decided from the experiment's design and the workload's load model.
"""

from __future__ import annotations

from collections.abc import Sequence

from servelab.config.experiment import Experiment
from servelab.config.load import Workload
from servelab.host.cpus import parse_cpu_list
from servelab.results.records import RunRecord

# Side by side, requests per CPU second of a stack is what it serves with a CPU to
# itself only when, alone, it keeps its CPUs busy: below this share of them (probed
# by the runner before its first side-by-side slices) the experiment is measured in
# turns from there on.
BUSY_SHARE = 0.85

LATENCY_METRICS = ("latency_mean_ms", "latency_p99_ms")
SHARE_METRICS = ("rps", "ok_rps")

SIDE_BY_SIDE_SHARE = (
    "side by side, a stack's requests/s is its share of the shared CPUs; "
    "requests per CPU second carries the verdict"
)
SIDE_BY_SIDE_LATENCY = (
    "side by side, a stack's latency includes waiting for the other stacks on its CPUs"
)
CLOSED_LATENCY = (
    "closed model: latency is concurrency / requests/s (coordinated omission), judged "
    "only at a fixed arrival rate (--rate) measured in turns"
)


def not_judged_because(experiment: Experiment, workload: Workload, metric: str) -> str | None:
    """Why ``metric`` gets no verdict for ``workload`` in this design; None when it does."""
    if experiment.side_by_side:
        if metric in SHARE_METRICS:
            return SIDE_BY_SIDE_SHARE
        if metric in LATENCY_METRICS:
            return SIDE_BY_SIDE_LATENCY
    if metric in LATENCY_METRICS and workload.load.model == "closed":
        return CLOSED_LATENCY
    return None


def replay_not_kept(runs: Sequence[RunRecord], variants: Sequence[str]) -> str | None:
    """Why a comparison of replays gets no verdict: a run of ``variants`` whose sender did
    not keep its access log's schedule (its latency is the sender's as much as the
    stack's, as capacity says of an untrusted trial); None when every one was kept."""
    for run in runs:
        replay = run.load.replay
        if run.variant in variants and replay is not None and not replay.kept:
            return (
                f"the replay was not kept in run {run.repetition} of {run.variant}: "
                f"{'; '.join(replay.problems)}"
            )
    return None


def on_own_cpus(runs: Sequence[RunRecord]) -> bool:
    """True when every round measured side by side gave each stack, and each stack's load
    driver, CPUs no other stack or driver of the round used: then nothing was shared, and
    a stack's requests/s and latency are its own."""
    rounds: dict[tuple[str, int], list[RunRecord]] = {}
    for run in runs:
        rounds.setdefault((run.workload, run.repetition), []).append(run)
    if not rounds:
        return False
    for members in rounds.values():
        for cpus in ([r.stack_cpus for r in members], [r.driver_cpus for r in members]):
            if any(c is None for c in cpus):
                return False
            sets = [parse_cpu_list(c) for c in cpus if c is not None]
            if sum(map(len, sets)) != len(frozenset().union(*sets)):
                return False
    return True


def as_measured(
    experiment: Experiment, runs: Sequence[RunRecord]
) -> tuple[Experiment, list[RunRecord]]:
    """The design the runs answer in, with the runs that belong to it: a side-by-side
    experiment that switched to measuring in turns (a stack alone left its CPUs idle,
    ``servelab.measuring.runner``) is analysed in turns, on the runs measured so; its
    side-by-side runs (shares of shared CPUs) are left out. Side by side on CPUs of
    their own (``on_own_cpus``) nothing was a share: judged as each stack alone."""
    if experiment.side_by_side and any(r.together is False for r in runs):
        apart = [r for r in runs if r.together is False]
        return experiment.model_copy(update={"side_by_side": False}), apart
    if experiment.side_by_side and on_own_cpus(runs):
        return experiment.model_copy(update={"side_by_side": False}), list(runs)
    return experiment, list(runs)


def idle_stacks(runs: Sequence[RunRecord]) -> list[RunRecord]:
    """The probed runs whose stack alone kept less than BUSY_SHARE of its CPUs busy."""
    return [
        r for r in runs if r.solo_cpu_share is not None and r.solo_cpu_share < BUSY_SHARE
    ]


def judged_metric(experiment: Experiment, workload: Workload, metric: str) -> str | None:
    """The metric that answers a question about ``metric`` in this design: itself when it
    is judged; requests per CPU second for requests/s side by side; None when nothing
    measured here can (latency side by side). ``servelab check``'s thresholds use it."""
    if not_judged_because(experiment, workload, metric) is None:
        return metric
    if experiment.side_by_side and metric in SHARE_METRICS:
        return "rps_per_cpu"
    return None


def latency_judged(experiment: Experiment) -> bool:
    """True when some workload's latency carries a verdict in this design."""
    return any(
        not_judged_because(experiment, w, "latency_p99_ms") is None for w in experiment.workloads
    )
