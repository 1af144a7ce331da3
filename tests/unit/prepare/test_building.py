"""Loading an experiment file: ``Experiment.from_toml`` checks what the model can (shapes),
``servelab.load_experiment`` checks the plug-ins' rules too, at load, and ``servelab.run``
refuses whatever it is given with the same one line before anything starts."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

import servelab
from servelab import api
from servelab.config.experiment import Experiment
from servelab.config.run import RunOptions
from servelab.errors import SpecError
from servelab.prepare.building import experiment_from_dict

# uvicorn has no threads: a good shape (threads is a knob of ServerSpec) that the server's
# own rule refuses.
BAD_KNOB = """\
repetitions = 2

[baseline.server]
kind = "uvicorn"
threads = 4

[[workloads]]
name = "w"
load = { duration_s = 4 }
"""

GOOD = """\
[baseline.server]
workers = 2

[[variants]]
name = "unix"
proxy = { transport = "unix" }

[grid]
"server.workers" = [1, 3]

[[workloads]]
name = "w"
load = { duration_s = 4 }
"""


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


def _refusal(call: Callable[[], object]) -> tuple[str, str]:
    with pytest.raises(SpecError) as refused:
        call()
    return str(refused.value), refused.value.fix


def test_from_toml_checks_shapes_and_leaves_the_plug_ins_to_prepare(tmp_path: Path) -> None:
    path = _file(tmp_path, BAD_KNOB)
    experiment = Experiment.from_toml(path)  # the shape is fine
    assert experiment.baseline.server.kind == "uvicorn"
    assert experiment.baseline.server.threads == 4
    assert experiment.source == str(path)

    loaded = _refusal(lambda: servelab.load_experiment(path))
    assert loaded[0].startswith(f"{path}: baseline.server: ")
    assert "threads" in loaded[0]
    out = tmp_path / "out"
    options = RunOptions(results_dir=out, pin=False, cpu_priority=False)
    assert _refusal(lambda: api.prepare(experiment, options)) == loaded
    assert _refusal(lambda: servelab.run(experiment, options)) == loaded
    assert not out.exists()  # refused before anything started or was stored


def test_a_shape_problem_is_refused_by_from_toml_itself(tmp_path: Path) -> None:
    path = _file(tmp_path, BAD_KNOB.replace("repetitions = 2", "repetitions = 0"))
    told = _refusal(lambda: Experiment.from_toml(path))
    assert told[0].startswith(f"{path}: repetitions: ")
    assert _refusal(lambda: servelab.load_experiment(path)) == told


def test_from_toml_builds_what_load_experiment_builds(tmp_path: Path) -> None:
    path = _file(tmp_path, GOOD)
    shaped = Experiment.from_toml(path)
    assert shaped.name == "exp"  # the file's stem
    assert [s.name for s in shaped.stacks] == [
        "baseline", "unix", "workers=1", "workers=3"
    ]
    assert shaped.slices > 1  # chosen from the loads, as for a checked one
    built = experiment_from_dict({"name": "exp", **tomllib.loads(GOOD)}, source=str(path))
    assert shaped.model_dump() == built.model_dump()
    assert servelab.load_experiment(str(path)).model_dump() == built.model_dump()


def test_an_experiment_not_read_from_a_file_is_told_under_its_name() -> None:
    data = tomllib.loads(BAD_KNOB)
    experiment = Experiment.model_validate({"name": "mine", **data})
    told = _refusal(lambda: api.prepare(experiment, RunOptions(pin=False, cpu_priority=False)))
    assert told[0].startswith("experiment mine: baseline.server: ")
