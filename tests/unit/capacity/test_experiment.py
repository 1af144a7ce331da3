"""What a capacity search measures from an experiment file: its stacks, baseline first,
and its first workload's request, each trial's rate set by the search."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.capacity import capacity_of_file
from servelab.config.examples import example_text
from servelab.errors import ServelabError


@pytest.mark.parametrize("name", ["port-vs-socket", "apache-mpms", "django-mix"])
def test_every_example_file_gives_its_stacks(name: str, tmp_path: Path) -> None:
    from servelab.prepare.building import load_experiment

    path = tmp_path / f"{name}.toml"
    path.write_text(example_text(name))
    original = load_experiment(path)
    experiment = capacity_of_file(path)
    assert [s.name for s in experiment.stacks] == [s.name for s in original.stacks]
    assert experiment.stacks == original.stacks
    [workload] = experiment.workloads
    assert workload.request == original.workloads[0].request
    assert workload.load.model == "open" and experiment.driver == "oha"


def test_a_bad_file_is_told_as_run_tells_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("name = 3\n")
    with pytest.raises(ServelabError):
        capacity_of_file(path)
