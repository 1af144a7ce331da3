"""The one step that asks the plug-ins: the model takes any knob of the right shape, and
``servelab.prepare`` refuses what the named server, front or driver cannot do, with the
line pydantic's path would have given (where: what, and how many more)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from servelab.api import run
from servelab.config.experiment import Experiment
from servelab.config.run import RunOptions
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.prepare.building import experiment_from_dict
from servelab.prepare.checks import checked, experiment_problems, stack_problems
from servelab.prepare.run import apply_run_options

WORKLOADS = [{"name": "w", "load": {"duration_s": 4}}]


def _raw(baseline: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": "t", "baseline": baseline, "workloads": WORKLOADS, **more}


def test_the_model_takes_a_knob_only_the_plug_in_refuses() -> None:
    experiment = Experiment.model_validate(_raw({"server": {"kind": "uvicorn", "threads": 4}}))
    with pytest.raises(SpecError) as caught:
        checked(experiment, "t.toml")
    assert caught.value.one_line() == (
        "t.toml: baseline.server: uvicorn has no threads setting (threads is a knob of "
        "gunicorn, granian, uwsgi, mod_wsgi) (fix: correct that value)"
    )


def test_problems_come_in_pydantics_order_and_are_counted() -> None:
    bad = {"server": {"kind": "uvicorn", "threads": 4}, "proxy": {"kind": "nginx", "mpm": "worker"}}
    experiment = Experiment.model_validate(_raw({}, variants=[]))
    experiment = experiment.with_stacks(
        [StackSpec.model_validate(bad), StackSpec.model_validate({**bad, "name": "v"})]
    )
    problems = experiment_problems(experiment)
    assert [p.partition(":")[0] for p in problems] == [
        "baseline.server", "baseline.proxy", "variants.0.server", "variants.0.proxy",
    ]
    with pytest.raises(SpecError, match=r"\(and 3 more problems\)"):
        checked(experiment)


def test_the_pairing_is_asked_only_of_a_sound_server_and_front() -> None:
    alone = StackSpec.model_validate({"server": {"kind": "mod_wsgi"}})
    assert stack_problems(alone, "baseline") == [
        "baseline: server kind 'mod_wsgi' runs the app inside Apache; set proxy kind 'apache'"
    ]
    # the front's own problem first; the pairing is not asked then
    both = StackSpec.model_validate({"server": {"kind": "mod_wsgi"}, "proxy": {"mpm": "worker"}})
    assert [p.partition(":")[0] for p in stack_problems(both, "baseline")] == ["baseline.proxy"]


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (
            {"driver": "ab", "driver_options": {"x": 1}},
            "value: load driver ab takes no driver_options",
        ),
        ({"driver": "locust", "driver_options": {"x": 1}}, "x: unknown key"),
        ({"driver": "wrk", "slices": 4}, "value: slices need the oha or locust driver"),
        ({"driver": "ab", "side_by_side": True}, "value: side_by_side measures slices at the same"),
        ({"driver": "wrk", "stopping": {}}, r"value: \[stopping\] adds interleaved rounds"),
    ],
)
def test_what_the_driver_cannot_do_is_refused(more: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=rf"^t\.toml: {message}"):
        experiment_from_dict(_raw({}, **more), source="t.toml")


def test_driver_options_from_the_command_line_are_checked_by_the_driver() -> None:
    experiment = experiment_from_dict(_raw({}, driver="locust"))
    with pytest.raises(SpecError, match=r"^driver options: locustfile: Input should be a valid"):
        apply_run_options(experiment, RunOptions(driver_options={"locustfile": 3}))


def test_a_callers_own_experiment_is_checked_before_anything_starts(tmp_path: Path) -> None:
    experiment = Experiment.model_validate(_raw({"proxy": {"kind": "none", "transport": "unix"}}))
    with pytest.raises(SpecError, match=r"^experiment t: baseline\.proxy: transport 'unix' needs"):
        run(experiment, RunOptions(results_dir=tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_new_experiments_switch_stored_ones_keep_theirs_and_profile_does_not() -> None:
    """Switched passes are a new experiment's default (``switching = false`` in its file
    turns them off); a stored experiment from before them was measured with a driver
    anew and says so; --profile measures without them, and --switch with it is refused."""
    assert experiment_from_dict(_raw({})).switching is True
    assert experiment_from_dict(_raw({}, switching=False)).switching is False
    assert experiment_from_dict(_raw({}, driver="wrk")).switching is False  # no passes
    assert Experiment.model_validate(_raw({})).switching is False  # as stored before
    experiment = experiment_from_dict(_raw({}))
    assert apply_run_options(experiment, RunOptions(profile=True)).switching is False
    assert apply_run_options(experiment, RunOptions(switching=False)).switching is False
    assert apply_run_options(experiment, RunOptions()).switching is True
    with pytest.raises(SpecError, match=r"^--switch and --profile cannot go together"):
        apply_run_options(experiment, RunOptions(profile=True, switching=True))
