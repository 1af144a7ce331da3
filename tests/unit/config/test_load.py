"""Loads: every run bounded; knob errors for recycling and somaxconn."""

from __future__ import annotations

import pytest

from servelab.config.building import experiment_from_dict
from servelab.errors import SpecError
from servelab.host.netns import check_somaxconn


@pytest.mark.parametrize(
    ("load", "message"),
    [
        ({"model": "open", "rate": 0, "requests": 10}, "greater than 0"),
        ({"model": "open", "rate": -1, "requests": 10}, "greater than 0"),
        ({"model": "open", "rate": 10, "duration_s": -1}, "greater than 0"),
        ({"model": "open", "rate": 1e9, "duration_s": 500}, "more than 10,000,000"),
        ({"model": "open", "rate": 1, "requests": 10_000}, "take 10,000 s to send"),
        ({"requests": 10, "max_time_s": 7200}, "less than or equal to 3600"),
        ({"model": "bursts", "requests": 10}, "needs burst_size and burst_gap_s"),
        ({"burst_size": 5, "requests": 10}, "belong to model = 'bursts'"),
        (
            {"model": "bursts", "burst_size": 1, "burst_gap_s": 10, "requests": 100},
            "take 1,000 s",
        ),
    ],
)
def test_unbounded_or_negative_loads_are_refused(load: dict, message: str) -> None:
    data = {
        "name": "x",
        "baseline": {},
        "workloads": [{"name": "w", "load": load}],
    }
    with pytest.raises(SpecError) as caught:
        experiment_from_dict(data)
    assert message in caught.value.one_line()


def test_knob_errors_for_recycling_and_somaxconn() -> None:
    base = {"name": "x", "workloads": [{"name": "w"}]}
    with pytest.raises(SpecError, match="max_requests_jitter needs max_requests"):
        experiment_from_dict({**base, "baseline": {"server": {"max_requests_jitter": 5}}})
    with pytest.raises(SpecError, match=r"network\.somaxconn"):
        experiment_from_dict({**base, "baseline": {"network": {"somaxconn": 0}}})
    with pytest.raises(SpecError, match="out of range"):
        check_somaxconn(70_000)
    assert check_somaxconn(128) == 128
