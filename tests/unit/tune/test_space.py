"""The tune's space and objective: parsing, defaults, names, limits. Pure."""

from __future__ import annotations

import pytest
from support import fake_load, fake_run

from servelab.errors import SpecError
from servelab.tune.objective import Objective
from servelab.tune.run import TuneSpec
from servelab.tune.space import (
    MAX_CANDIDATES,
    KnobLists,
    SubGrid,
    default_workers,
    expand_space,
    space_from_knobs,
    space_from_table,
)

BASE = {"app": {"ref": "fastapi"}, "proxy": {"kind": "nginx"}}


def test_sub_grids_expand_into_named_candidates_merged_onto_the_baseline():
    space = space_from_table(
        [
            {"server": {"kind": "gunicorn", "worker_class": "uvicorn"},
             "grid": {"server.workers": [1, 2], "proxy.transport": ["tcp", "unix"]}},
            {"server": {"kind": "granian"}, "grid": {"server.workers": [2]}},
        ],
        "space.toml",
    )
    candidates = expand_space(BASE, space)
    assert [c.name for c in candidates] == [
        "gunicorn-uvicorn w=1 tcp", "gunicorn-uvicorn w=1 unix", "gunicorn-uvicorn w=2 tcp",
        "gunicorn-uvicorn w=2 unix", "granian w=2",
    ]
    last = candidates[-1].stack
    assert last["server"] == {"kind": "granian", "workers": 2}
    assert last["proxy"] == {"kind": "nginx"} and last["app"] == {"ref": "fastapi"}
    assert candidates[1].stack["proxy"]["transport"] == "unix"


def test_the_spec_builds_one_validated_experiment_of_every_candidate():
    spec = TuneSpec(space=(SubGrid({"server": {"kind": "uvicorn"}}, {"server.workers": [1, 2]}),))
    experiment = spec.experiment()
    assert [s.name for s in experiment.stacks] == ["uvicorn w=1", "uvicorn w=2"]
    assert experiment.slices == 2 and experiment.workloads[0].load.duration_s == 2.0
    assert experiment.warmup.duration_s == 1.0 and experiment.stopping is None
    rated = TuneSpec(space=spec.space, objective=Objective("min-p99", rate=300)).experiment()
    assert rated.workloads[0].load.model == "open" and rated.workloads[0].load.rate == 300
    assert rated.slices == 1  # an open-model load keeps its own schedule


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ({}, "must be a non-empty array"),
        ([{"servers": {}}], "unknown key 'servers'"),
        ([{"server": "gunicorn"}], "server must be a table"),
        ([{"grid": {"server.colour": [1]}}], "grid knob 'server.colour' is not tunable"),
        ([{"grid": {"server.workers": []}}], "needs a non-empty list"),
        ([{"grid": {"server.workers": 3}}], "needs a non-empty list"),
    ],
)
def test_a_bad_space_table_is_one_line_naming_the_entry(table, said):
    with pytest.raises(SpecError, match=said):
        space_from_table(table, "space.toml")


def test_repeated_or_too_many_candidates_are_refused():
    twice = [SubGrid({"server": {"kind": "uvicorn"}}, {"server.workers": [1]})] * 2
    with pytest.raises(SpecError, match="'uvicorn w=1' more than once"):
        expand_space(BASE, twice)
    huge = [SubGrid({}, {"server.workers": list(range(1, 42)), "server.backlog": [1, 2, 3, 4, 5]})]
    with pytest.raises(SpecError, match=f"at most {MAX_CANDIDATES}"):
        expand_space(BASE, huge)


def test_defaults_follow_the_app_kind_what_is_installed_and_the_cpus():
    asgi = space_from_knobs(
        KnobLists(), interface="asgi", installed=("gunicorn", "uvicorn", "granian"),
        stack_cpus=1,
    )
    assert [g.label for g in asgi] == ["gunicorn-uvicorn", "uvicorn", "granian"]
    assert asgi[0].grid["server.workers"] == (1, 2, 3) == default_workers(1)
    assert asgi[0].grid["proxy.upstream_keepalive"] == (0, 8)
    wsgi = space_from_knobs(
        KnobLists(workers=(2,)), interface="wsgi", installed=("gunicorn", "uwsgi"), stack_cpus=4
    )
    assert [g.label for g in wsgi] == ["gunicorn-sync", "gunicorn-gthread", "uwsgi"]
    assert "server.threads" not in wsgi[0].grid and wsgi[1].grid["server.threads"] == (2, 4)
    assert default_workers(4) == tuple(range(1, 10))  # 2 x 4 + 1, at most 9
    # threads only where the server has them; no keepalive pooling when told so.
    mixed = space_from_knobs(
        KnobLists(servers=("uvicorn", "granian"), threads=(1, 2), upstream_keepalive=(0,)),
        interface="asgi", installed=("uvicorn", "granian"), stack_cpus=1,
    )
    assert "server.threads" not in mixed[0].grid and mixed[1].grid["server.threads"] == (1, 2)
    assert all("proxy.upstream_keepalive" not in g.grid for g in mixed)


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"kind": "max-fun"}, "unknown objective 'max-fun'"),
        ({"kind": "min-p99"}, "pass --rate"),
        ({"rate": 100}, "leave out --rate"),
        ({"p99_ms": 0}, "--p99-ms must be positive"),
        ({"max_error_ratio": 1.5}, "--max-error-ratio must be from 0 to below 1"),
    ],
)
def test_an_impossible_objective_is_one_line_with_the_fix(kwargs, said):
    with pytest.raises(SpecError) as refused:
        Objective(**kwargs)
    assert said in refused.value.one_line()


def test_limits_are_judged_per_start_and_on_average():
    goal = Objective(p99_ms=50, max_error_ratio=0.01)
    ok = fake_run("a", "tune", 1, load=fake_load(requests=1000, p99_ms=40))
    late = fake_run("a", "tune", 2, load=fake_load(requests=1000, p99_ms=90))
    failing = fake_run(
        "a", "tune", 3, load=fake_load(codes={"200": 900, "502": 100}, p99_ms=90)
    )
    assert goal.broken_limits(ok) == []
    assert goal.broken_limits(failing) == ["p99 90.0 ms > 50 ms", "errors 0.1 > 0.01"]
    assert goal.breaks_always([late], min_starts=2) is None  # one start says too little
    assert goal.breaks_always([ok, late], min_starts=2) is None
    assert "p99 90.0 ms > 50 ms" in goal.breaks_always([late, failing], min_starts=2)
    assert goal.meets_on_average([ok]) and not goal.meets_on_average([ok, late])
    assert goal.describe() == "the most requests/s, p99 <= 50 ms, errors <= 0.01"


def test_build_takes_the_file_the_command_line_and_what_is_installed(monkeypatch):
    from servelab.tune import build

    monkeypatch.setattr(build, "installed_servers", lambda python: ("gunicorn", "uvicorn"))
    spec, notes = build.build_tune(
        {"objective": "min-memory", "rate": 50, "max_rounds": 4}, source="t.toml", app=None,
        request_given=False, budget_s=None, workers=(1, 2), stack_cpus="0", tie_pct=3,
    )
    assert [g.label for g in spec.space] == ["gunicorn-uvicorn", "uvicorn"]
    assert spec.objective.kind == "min-memory" and spec.objective.rate == 50
    assert (spec.settings.max_rounds, spec.settings.tie_pct) == (4, 3.0)
    assert spec.request.path == "/async/items/" and spec.request.method == "POST"
    assert notes == ["16 candidates; objective: the least memory at 50 req/s, errors <= 0.01"]
    with pytest.raises(SpecError) as refused:
        build.build_tune({}, source="cli", app=None, request_given=False, budget_s=None,
                         servers=("granian",))
    assert "app server 'granian' is not installed" in refused.value.one_line()


def _every_subset(names):
    return [
        tuple(n for i, n in enumerate(names) if mask >> i & 1)
        for mask in range(1, 2 ** len(names))
    ]


@pytest.mark.parametrize(("interface", "app"), [("asgi", {"ref": "fastapi"}),
                                                 ("wsgi", {"ref": "sleepy"})])
def test_the_default_space_validates_for_every_set_of_installed_servers(interface, app):
    """Whatever servers are installed, the default space for either kind of app is one
    valid experiment: no knob of one candidate's server (gunicorn's worker class and
    threads) leaks into another's (issue 26: granian got worker_class from gunicorn)."""
    from servelab.plugins.server import get_server
    from servelab.registry import standalone_servers

    servers = standalone_servers()
    tried = 0
    for installed in _every_subset(servers):
        space = space_from_knobs(KnobLists(workers=(1, 2)), interface=interface,
                                 installed=installed, stack_cpus=1)
        if not space:
            continue  # nothing installed serves this interface: build_tune says so
        for first in range(len(space)):  # whichever sub-grid comes first is the baseline
            order = (*space[first:], *space[:first])
            experiment = TuneSpec(space=order, app=app).experiment()
            for stack in experiment.stacks:
                knobs = get_server(stack.server.kind).knobs
                given = {"worker_class", "threads"} & stack.server.model_fields_set
                assert given <= set(knobs), (installed, stack.name)
            tried += 1
    assert tried > len(servers)
