"""The one preparation step (``servelab.api.prepare``): every rewrite of the experiment
in one place, the plug-ins asked once at the end, a problem told as the step that brought
it; the result a frozen ``Prepared`` whose environment facts the session is handed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from servelab import api
from servelab.config.experiment import Experiment
from servelab.config.run import RunOptions, UserApp
from servelab.errors import SpecError
from servelab.prepare import checks
from servelab.prepare.building import experiment_from_dict
from servelab.prepare.checks import Stage, checked_stages

WORKLOADS = [{"name": "w", "load": {"duration_s": 4}}]
# No CPU pinning: the plan is the same on every machine the tests run on.
UNPINNED = RunOptions(pin=False, cpu_priority=False)


def _raw(baseline: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": "t", "baseline": baseline, "workloads": WORKLOADS, **more}


def _experiment(**more: Any) -> Experiment:
    return experiment_from_dict(_raw({}, variants=[{"name": "v"}], **more), source="t.toml")


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[Experiment]:
    """Every experiment the plug-ins are asked about, in turn."""
    seen: list[Experiment] = []
    problems = checks.experiment_problems

    def counting(experiment: Experiment) -> list[str]:
        seen.append(experiment)
        return problems(experiment)

    monkeypatch.setattr(checks, "experiment_problems", counting)
    return seen


def test_a_sound_experiment_is_asked_of_the_plug_ins_once(asked: list[Experiment]) -> None:
    options = dataclasses.replace(UNPINNED, order="random", order_seed=3, precision_pct=5.0)
    experiment = _experiment(driver="oha", slices=4)
    asked.clear()  # building from a dict asked once already
    prepared = api.prepare(experiment, options)
    assert len(asked) == 1 and asked[0] is prepared.experiment
    assert (prepared.experiment.order, prepared.experiment.order_seed) == ("random", 3)
    assert prepared.experiment.stopping is not None
    assert prepared.experiment.stopping.precision_pct == 5.0
    assert prepared.options is options and prepared.app is None and prepared.database is None


def test_the_environment_facts_are_part_of_the_result() -> None:
    prepared = api.prepare(_experiment(), UNPINNED)
    (python,) = prepared.setup["app_python"]  # one interpreter: servelab's
    assert python["path"] and python["packages"]
    assert "database" not in prepared.setup  # nothing set up before ``started``
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.experiment = _experiment()  # type: ignore[misc]


def test_a_plain_experiment_starts_nothing() -> None:
    prepared = api.prepare(_experiment(), UNPINNED)
    assert not prepared.needs_starting
    with api.started(prepared, say=lambda note: None) as running:
        assert running is prepared


def test_a_problem_an_option_brings_is_told_as_that_option() -> None:
    experiment = _experiment(driver="locust")
    with pytest.raises(SpecError, match=r"^driver options: locustfile: Input should be a"):
        api.prepare(experiment, dataclasses.replace(UNPINNED, driver_options={"locustfile": 3}))


def test_the_callers_own_problem_is_told_before_a_later_steps() -> None:
    # Both the experiment (a unix socket with no front) and --precision are wrong: the
    # experiment is told first, as when each step checked its own result.
    experiment = Experiment.model_validate(_raw({"proxy": {"kind": "none", "transport": "unix"}}))
    with pytest.raises(SpecError, match=r"^experiment t: baseline\.proxy: transport 'unix'"):
        api.prepare(experiment, dataclasses.replace(UNPINNED, precision_pct=-1.0))
    with pytest.raises(SpecError, match=r"^--precision must be positive"):
        api.prepare(_experiment(), dataclasses.replace(UNPINNED, precision_pct=-1.0))


def test_the_users_database_options_are_refused_before_anything_starts() -> None:
    user = UserApp(database="sqlite", db_latency_ms=20.0)
    with pytest.raises(SpecError, match=r"^--db-latency slows the link to PostgreSQL"):
        api.prepare(_experiment(), UNPINNED, user)


def test_the_stage_that_brought_a_problem_is_blamed() -> None:
    sound = _experiment(driver="oha", slices=4)
    broken = sound.model_copy(update={"driver": "wrk"})  # wrk cannot slice
    stages = [Stage(sound, "experiment t"), Stage(broken, "--driver", "pick oha")]
    with pytest.raises(SpecError) as caught:
        checked_stages(stages)
    assert caught.value.one_line().startswith("--driver: value: slices need the oha")
    assert caught.value.one_line().endswith("(fix: pick oha)")
    assert checked_stages(stages[:1]) is sound


def test_run_hands_the_session_the_prepared_experiment_and_its_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servelab.session import ExperimentSession

    handed: list[ExperimentSession] = []
    monkeypatch.setattr(ExperimentSession, "run", lambda self: handed.append(self))
    api.run(_experiment(), dataclasses.replace(UNPINNED, results_dir=tmp_path, slices=1))
    (session,) = handed
    assert session.experiment.slices == 1 and not session.experiment.side_by_side
    assert list(session.setup) == ["app_python"]


def test_the_cpu_plan_says_what_this_machine_can_do(monkeypatch: pytest.MonkeyPatch) -> None:
    from servelab.host import cgroups

    favoured = dataclasses.replace(UNPINNED, cpu_priority=True)
    monkeypatch.setattr(cgroups, "quota_unavailable_reason", lambda: "not root")
    assert not api.prepare(_experiment(), favoured).cpu_plan.cpu_priority
    monkeypatch.setattr(cgroups, "quota_unavailable_reason", lambda: None)
    assert api.prepare(_experiment(), favoured).cpu_plan.cpu_priority


def test_a_note_said_once_is_not_said_again_when_asked() -> None:
    import io

    from rich.console import Console

    from servelab.api import saying

    out = io.StringIO()
    say = saying(Console(file=out, width=200), once=True)
    for note in ("app is WSGI", "check #1", "app is WSGI", "check #2"):
        say(note)
    assert out.getvalue().splitlines() == [
        "servelab: app is WSGI", "servelab: check #1", "servelab: check #2"]
    out = io.StringIO()
    say = saying(Console(file=out, width=200))
    say("x")
    say("x")
    assert out.getvalue().count("servelab: x") == 2  # by default every note is said
