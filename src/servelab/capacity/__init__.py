"""``servelab capacity``: how much traffic each variant holds under an SLO, with an
interval (docs/capacity.md). ``search`` is the pure search, ``trials`` what one trial
measured and whether it is trusted, ``run`` the measuring, ``answer`` the words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servelab.capacity.run import CapacityPlan, VariantCapacity
from servelab.capacity.slo import Slo, parse_slo

__all__ = [
    "CapacityPlan",
    "Slo",
    "VariantCapacity",
    "capacity_experiment",
    "parse_slo",
]

WORKLOAD = "request"


def capacity_experiment(
    name: str, stacks: Sequence[dict[str, Any]], request: dict[str, Any]
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
        "driver": DEFAULT_DRIVER,  # the open model, and each request's send time
        "warmup": {"requests": 0},  # the throughput probe warms each stack
        "repetitions": 1,
    }
