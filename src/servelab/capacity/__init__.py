"""``servelab capacity``: how much traffic each variant holds under an SLO, with an
interval (docs/capacity.md). ``search`` is the pure search, ``trials`` what one trial
measured and whether it is trusted, ``run`` the measuring, ``answer`` the words."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from servelab.capacity.plan import CapacityPlan, VariantCapacity
from servelab.capacity.slo import Slo, parse_slo
from servelab.config.experiment import Experiment

__all__ = [
    "CapacityPlan",
    "Slo",
    "VariantCapacity",
    "capacity_experiment",
    "capacity_of_file",
    "parse_slo",
]

WORKLOAD = "request"


def capacity_experiment(
    name: str, stacks: Sequence[dict[str, Any]], request: dict[str, Any],
    driver: str | None = None,
) -> dict[str, Any]:
    """The experiment (as a dict for ``experiment_from_dict``) whose stacks a capacity search
    measures: its one workload names the request; the search sets each trial's rate."""
    from servelab.registry import DEFAULT_DRIVER

    return {
        "name": name,
        "baseline": stacks[0],
        "variants": list(stacks[1:]),
        "workloads": [{
            "name": WORKLOAD, "request": request,
            "load": {"model": "open", "rate": 10.0, "requests": 10},
        }],
        # The open model, and each request's intended send time: oha, unless given
        # (``registry.scheduling_drivers``).
        "driver": driver or DEFAULT_DRIVER,
        "warmup": {"requests": 0},  # the throughput probe warms each stack
        "repetitions": 1,
    }


def capacity_of(experiment: Experiment, source: str, driver: str | None = None) -> Experiment:
    """``experiment``'s stacks (its baseline first, each whole), with its first workload's
    request, as a capacity search measures them: the experiment itself with the search's
    one workload and settings (``capacity_experiment``'s), not built again; its plug-ins'
    rules are checked once, by ``api.prepare``, told under ``source``."""
    from servelab.config.load import LoadSpec, WarmupSpec, Workload
    from servelab.registry import DEFAULT_DRIVER

    workload = Workload(
        name=WORKLOAD, request=experiment.workloads[0].request,
        load=LoadSpec(model="open", rate=10.0, requests=10),
    )
    return experiment.model_copy(update={
        "workloads": (workload,), "driver": driver or DEFAULT_DRIVER, "driver_options": {},
        "warmup": WarmupSpec(requests=0), "repetitions": 1, "slices": 1, "switching": False,
        "side_by_side": False, "stopping": None, "slo": None,
    }).told_as(experiment._read_from or source)


def capacity_of_file(path: Path, driver: str | None = None) -> Experiment:
    """The experiment file's stacks with its first workload's request (``capacity_of``);
    the file's shapes checked here, as `servelab run` tells them, the rest by
    ``api.prepare``."""
    return capacity_of(Experiment.from_toml(path), str(path), driver)
