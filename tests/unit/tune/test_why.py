"""tune --profile without servers: which candidates are the finalists, and the Why part
tune.md, tune.json and tune-flame.svg get from fixed profile records."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from support import fake_load, fake_run

from servelab.results.profiles import profile_file, write_profile
from servelab.results.records import ProcessUsage, ProfileInfo
from servelab.tune.objective import MIB, Objective
from servelab.tune.race import RaceSettings, race_state
from servelab.tune.recommendation import MOST_FINALISTS, finalists, recommend
from servelab.tune.report import TUNE_JSON, TUNE_MARKDOWN
from servelab.tune.run import TuneProgress, TuneSpec
from servelab.tune.space import SubGrid
from servelab.tune.why import PROFILED_STARTS, TUNE_FLAME, split_runs

REQUESTS = 1000
SPIN_US = 100.0  # B's extra CPU per request, all of it in spin()
BASE_US = 300.0  # what A's and B's app workers spend on the rest, per request
JITTER = (-4.0, 1.0, 3.0)  # start to start, so that the intervals have a spread


def run(name: str, repetition: int, rps: float, memory_mib: float = 100.0):
    app = ProcessUsage(
        role="app", pid=1, name="x", cpu_s=1.0, peak_rss_bytes=int(memory_mib * MIB)
    )
    return fake_run(name, "tune", repetition, load=fake_load(rps=rps, requests=REQUESTS),
                    processes=(app,))


def race_runs(rounds: int = 2) -> list:
    """A well ahead of B in every round."""
    return [run(name, n, rps) for n in range(1, rounds + 1)
            for name, rps in (("A", 1000.0), ("B", 700.0))]


def profiled_run(name: str, repetition: int, jitter: float, where: Path):
    """A profiled start: app workers at BASE_US (+ SPIN_US in spin() for B) per request,
    split between two functions by the samples of its folded stacks (on disk)."""
    spin = SPIN_US + jitter if name == "B" else 0.0
    base = BASE_US + jitter
    processes = (
        ProcessUsage(role="app", pid=10, name="gunicorn", cpu_s=0.001, peak_rss_bytes=MIB),
        ProcessUsage(role="app", pid=11, name="gunicorn", cpu_s=(base + spin) * REQUESTS / 1e6,
                     peak_rss_bytes=MIB),
        ProcessUsage(role="nginx", pid=20, name="nginx", cpu_s=50 * REQUESTS / 1e6,
                     peak_rss_bytes=MIB),
    )
    stacks = {"app workers;main (app.py:1);handle (app.py:5);serialise (app.py:9)": round(base)}
    if spin:
        stacks["app workers;main (app.py:1);handle (app.py:5);spin (app.py:20)"] = round(spin)
    file = profile_file(name, "tune", repetition)
    write_profile(where, file, stacks)
    info = ProfileInfo(file=file, samples=sum(stacks.values()), rate_hz=100, masters=(10,))
    return fake_run(name, "tune", repetition, load=fake_load(rps=1000.0, requests=REQUESTS),
                    processes=processes, profile=info)


def profiled_starts(where: Path, first: int) -> list:
    return [profiled_run(name, first + k, jitter, where)
            for k, jitter in enumerate(JITTER) for name in ("A", "B")]


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path


def spec() -> TuneSpec:
    space = (SubGrid({"server": {"kind": "gunicorn"}}, {"server.workers": (1, 2)}),)
    return TuneSpec(space=space, settings=RaceSettings(halving_rounds=0))


# -- finalists -------------------------------------------------------------------------

def test_the_recommended_comes_first_then_the_leader_then_the_others_still_in():
    noise = [1.0, 1.03, 0.97, 1.01]
    names = ("fat", "lean", "c", "d")
    # Each its own noise (a paired test sees a spread), all within 1 %: tied.
    runs = [run(name, n, (1000 - 2 * i) * noise[(n + i) % 4], memory_mib=300 - 50 * i)
            for i, name in enumerate(names) for n in range(1, 5)]
    settings = RaceSettings(halving_rounds=0, tie_pct=10)
    state = race_state(runs, names, Objective(), settings)
    advice = recommend(state, Objective(), settings)
    chosen = finalists(state, advice, runs, Objective())
    assert advice.candidate is not None and advice.candidate != advice.winner  # the cheaper
    assert chosen[:2] == (advice.candidate, advice.winner)
    assert len(chosen) == MOST_FINALISTS == len(set(chosen))
    assert set(chosen) <= set(state.contenders)
    rest = [c for c in state.contenders if c not in chosen[:2]]
    assert chosen[2] == rest[0]  # the best of the others


def test_one_left_is_explained_against_the_best_of_those_dropped_last():
    runs = [run(name, n, rps * k) for n, k in enumerate((1.0, 1.01, 0.99), start=1)
            for name, rps in (("fast", 1000.0), ("slow", 600.0), ("slower", 300.0))]
    settings = RaceSettings(halving_rounds=0)
    state = race_state(runs, ("fast", "slow", "slower"), Objective(), settings)
    assert state.contenders == ("fast",)
    advice = recommend(state, Objective(), settings)
    assert advice.candidate == "fast" and advice.runner_up is None
    assert finalists(state, advice, runs, Objective()) == ("fast", "slow")
    assert finalists(state, advice, runs, Objective(), most=1) == ("fast",)


def test_nothing_measured_no_finalists():
    state = race_state([], ("a", "b"), Objective())
    assert finalists(state, recommend(state, Objective()), [], Objective()) == ()


def test_the_profiled_starts_are_kept_out_of_the_race(tmp_path):
    race = race_runs()
    profiled = profiled_starts(tmp_path, 3)
    assert split_runs([*race, *profiled]) == (race, profiled)
    assert split_runs(race) == (race, [])


# -- the Why part from fixed profile records --------------------------------------------

def test_tune_md_ends_with_why_the_recommended_is_ahead(tmp_path):
    progress = TuneProgress(spec(), ("A", "B"))
    progress.store = Store(tmp_path)
    progress.runs = [*race_runs(), *profiled_starts(tmp_path, 3)]
    state, _ = progress.write(chart=False)
    assert state.rounds == 2  # the profiled starts are not rounds of the race
    assert all(s.starts == 2 for s in state.standings)

    markdown = (tmp_path / TUNE_MARKDOWN).read_text()
    why = markdown[markdown.index("## Why"):]
    assert "A against the other finalists" in why and f"A {len(JITTER)}, B {len(JITTER)}" in why
    lines = why.splitlines()
    head = next(line for line in lines if line.startswith("A vs B (tune): stack CPU"))
    assert f"{len(JITTER)} vs {len(JITTER)} profiled starts" in head
    functions = [line.strip() for line in lines if " µs/request (95 % " in line
                 and line.strip().endswith(")") and " in " in line and "by part" not in line]
    top = functions[0]
    assert top.endswith("in spin (app.py)"), functions
    difference = float(top.split(" µs/request")[0])
    low, high = (float(x) for x in top.split("(95 % ")[1].split(")")[0].split(" to "))
    assert low <= -SPIN_US <= high and difference < 0
    assert f"Differential flame graph: {TUNE_FLAME}" in why

    svg = ET.parse(tmp_path / TUNE_FLAME).getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert "A vs B" in (tmp_path / TUNE_FLAME).read_text()

    document = json.loads((tmp_path / TUNE_JSON).read_text())["why"]
    assert document["explained"] == "A" and document["finalists"] == ["A", "B"]
    against = document["against"][0]
    assert against["candidate"] == "B"
    assert against["functions"][0]["name"] == "spin (app.py)"
    low, high = against["functions"][0]["interval_us"]
    assert low <= -SPIN_US <= high
    assert against["lines"][0] == head


def test_without_profiles_no_why_part(tmp_path):
    progress = TuneProgress(spec(), ("A", "B"))
    progress.store = Store(tmp_path)
    progress.runs = race_runs()
    progress.write(chart=False)
    assert "## Why" not in (tmp_path / TUNE_MARKDOWN).read_text()
    assert "why" not in json.loads((tmp_path / TUNE_JSON).read_text())
    assert not (tmp_path / TUNE_FLAME).exists()


# -- the race, then its finalists profiled ------------------------------------------------

def test_the_finalists_are_profiled_once_the_race_is_over(tmp_path):
    calls: list[dict] = []
    tune = spec()
    experiment = tune.experiment()
    names = tuple(s.name for s in experiment.stacks)
    rps = dict(zip(names, (700.0, 1000.0), strict=True))  # the second one is better

    def measure_round(exp, store, cpu_plan, *, events, previous, driver, listen_host,
                      **more):
        calls.append({"stacks": [s.name for s in exp.stacks], **more})
        if "profiler" not in more:
            number = exp.repetitions
            return [fake_run(s.name, exp.workloads[0].name, number,
                             load=fake_load(rps=rps[s.name] * (1 + 0.01 * number),
                                            requests=REQUESTS),
                             processes=run(s.name, number, 1.0).processes)
                    for s in exp.stacks]
        measured = []
        for repetition in more["rounds"]:
            for name in (s.name for s in exp.stacks):
                record = profiled_run("B" if name == names[0] else "A", repetition,
                                      JITTER[repetition % len(JITTER)], tmp_path)
                file = profile_file(name, exp.workloads[0].name, repetition)
                write_profile(tmp_path, file, {
                    line.rpartition(" ")[0]: int(line.rpartition(" ")[2])
                    for line in (tmp_path / record.profile.file).read_text().splitlines()
                })
                measured.append(record.model_copy(update={
                    "variant": name, "workload": exp.workloads[0].name,
                    "profile": record.profile.model_copy(update={"file": file}),
                }))
        return measured

    said: list[str] = []
    progress = TuneProgress(tune, names, say=said.append, profile=True)
    progress.measure(experiment, Store(tmp_path), None, measure_round=measure_round,
                     profiler="/usr/bin/py-spy")
    race = [c for c in calls if "profiler" not in c]
    profiled = [c for c in calls if "profiler" in c]
    state = progress.state()
    assert state.over is not None and len(race) == state.rounds
    assert len(profiled) == 1 and profiled[0]["profiler"] == "/usr/bin/py-spy"
    assert profiled[0]["rounds"] == list(range(state.rounds + 1,
                                               state.rounds + 1 + PROFILED_STARTS))
    assert profiled[0]["stacks"] == [names[1], names[0]]  # the recommended first
    assert any(note.startswith("profiling the 2 finalists") for note in said)
    markdown = (tmp_path / TUNE_MARKDOWN).read_text()
    assert f"**Recommended: {names[1]}**" in markdown
    assert f"{names[1]} vs {names[0]} (tune)" in markdown
    assert (tmp_path / TUNE_FLAME).is_file()


def test_profile_asked_without_py_spy_says_so_and_races_alike(tmp_path):
    tune = spec()
    experiment = tune.experiment()
    names = tuple(s.name for s in experiment.stacks)
    seen: list[dict] = []

    def measure_round(exp, store, cpu_plan, *, events, previous, driver, listen_host,
                      **more):
        seen.append(more)
        number = exp.repetitions
        return [fake_run(s.name, exp.workloads[0].name, number,
                         load=fake_load(rps=1000.0 - 300 * i, requests=REQUESTS),
                         processes=run(s.name, number, 1.0).processes)
                for i, s in enumerate(exp.stacks)]

    progress = TuneProgress(tune, names, profile=True)
    progress.measure(experiment, Store(tmp_path), None, measure_round=measure_round)
    assert seen and all(more == {} for more in seen)  # no profiled round
    markdown = (tmp_path / TUNE_MARKDOWN).read_text()
    assert "## Why" in markdown and "Not explained: py-spy could not profile here" in markdown
    assert progress.state().over is not None


def test_resumed_during_the_profiled_starts_only_they_go_on(tmp_path):
    """Ctrl-C while the finalists were profiled, then --resume: no more race rounds; the
    profiled starts go on from the same repetitions (the runner skips those stored)."""
    progress = TuneProgress(spec(), ("A", "B"), profile=True)
    previous = [*race_runs(), *profiled_starts(tmp_path, 3)[:2]]  # 1 of 3 profiled starts
    calls: list[dict] = []

    def measure_round(exp, store, cpu_plan, *, events, previous, driver, listen_host,
                      **more):
        calls.append({"stacks": [s.name for s in exp.stacks], **more})
        return []

    experiment = spec().experiment()  # its stacks named as the fixture's candidates
    stacks = [s.model_copy(update={"name": n})
              for s, n in zip(experiment.stacks, ("A", "B"), strict=True)]
    progress.measure(experiment.with_stacks(stacks), Store(tmp_path), None,
                     previous=previous, measure_round=measure_round, profiler="py-spy")
    assert len(calls) == 1 and calls[0]["rounds"] == [3, 4, 5]
    assert calls[0]["stacks"] == ["A", "B"]
    assert progress.state().rounds == 2
