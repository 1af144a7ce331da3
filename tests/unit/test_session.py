"""The session (store, progress, answer) end to end with a fake executor: no servers."""

from __future__ import annotations

import io
import math
import random
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from support import FakeClock, FakeExecutor, fake_run

from servelab.errors import StackStartError
from servelab.host.cpus import CpuPlan
from servelab.measuring import Runner
from servelab.prepare.building import experiment_from_dict
from servelab.results.database import DB_FILE, Database
from servelab.session import ExperimentSession


def fake_measure(level):
    def measure(experiment, store, cpu_plan, *, events, driver, previous, so_far):
        return Runner(
            experiment, store, FakeExecutor(level), events, previous, so_far=so_far
        ).run()

    return measure


def test_a_session_stores_every_run_and_ends_with_the_answer(tmp_path: Path):
    rng = random.Random(5)

    def level(variant, start, tick, workload):
        return 1000 * math.exp((0.3 if variant == "fast" else 0.0) + rng.gauss(0, 0.01))

    experiment = experiment_from_dict(
        {
            "name": "session",
            "repetitions": 7,  # 6 degrees of freedom: the least a clear answer needs
            "baseline": {"name": "base"},
            "variants": [{"name": "fast", "proxy": {"transport": "unix"}}],
            "workloads": [{"name": "w", "request": {"path": "/"}, "load": {"duration_s": 2}}],
            "side_by_side": True,
            "stopping": {"precision_pct": 50, "budget_s": 60},
        }
    )
    terminal, screen = io.StringIO(), io.StringIO()
    session = ExperimentSession(
        experiment,
        CpuPlan("0", "1", cpu_priority=False),
        tmp_path,
        console=Console(file=terminal, width=200),
        out=Console(file=screen, width=200),
        measure=fake_measure(level),
    )
    store = session.run()
    database = Database(tmp_path / DB_FILE)
    assert len(database.runs(store.id)) == 14
    report = (store.path / "report.md").read_text()
    assert report.index("## Answer") < report.index("## w")
    assert "winner **fast**" in report
    text = screen.getvalue()
    assert "Answer" in text and "winner fast" in text
    assert "measuring stopped: every requests per cpu second comparison is clear" in text
    assert text.rstrip().splitlines()[-1].startswith("result #1")



def test_a_budget_too_small_for_a_clear_answer_is_said_at_the_first_look(tmp_path: Path):
    rng = random.Random(7)

    def level(variant, start, tick, workload):
        return 1000 * math.exp(rng.gauss(0, 0.2))  # far too noisy for ±1 % in the budget

    def timed_measure(experiment, store, cpu_plan, *, events, driver, previous, so_far):
        clock = FakeClock()  # each window takes its second: rounds take time, as real ones
        executor = FakeExecutor(level, clock=clock, seconds_per_window=1.0)
        return Runner(
            experiment, store, executor, events, previous, so_far=so_far, clock=clock
        ).run()

    experiment = experiment_from_dict(
        {
            "name": "noisy",
            "repetitions": 2,
            "baseline": {"name": "base"},
            "variants": [{"name": "other", "proxy": {"transport": "unix"}}],
            "workloads": [{"name": "w", "request": {"path": "/"}, "load": {"duration_s": 2}}],
            "side_by_side": False,
            "stopping": {"precision_pct": 1, "budget_s": 60},
        }
    )
    terminal = io.StringIO()
    ExperimentSession(
        experiment,
        CpuPlan("0", "1", cpu_priority=False),
        tmp_path,
        console=Console(file=terminal, width=300),
        out=Console(file=io.StringIO(), width=300),
        measure=timed_measure,
        detail=True,
    ).run()
    text = terminal.getvalue()
    assert text.count("the budget cannot make every answer clear") == 1
    # Said with the first look's line (clear so far, time to go), not at the end.
    assert text.index("the budget cannot make every answer clear") < text.index(
        "another round of starts"
    )
    assert "0/1 clear, ~" in text

def _session(tmp_path: Path, measure) -> ExperimentSession:
    experiment = experiment_from_dict(
        {
            "name": "refused",
            "repetitions": 2,
            "baseline": {"name": "base"},
            "workloads": [{"name": "w", "load": {"duration_s": 2}}],
        }
    )
    quiet = Console(file=io.StringIO())
    return ExperimentSession(
        experiment, CpuPlan("0", "1", cpu_priority=False), tmp_path, console=quiet, out=quiet,
        measure=measure,
    )


def test_an_experiment_refused_before_its_first_run_stores_nothing(tmp_path: Path):
    def refused(experiment, store, cpu_plan, *, events, driver, previous, **_):
        assert store.path.is_dir()  # created, then taken back
        raise StackStartError("the app answered HTTP 404, expected 200")

    with pytest.raises(StackStartError):
        _session(tmp_path, refused).run()
    assert Database(tmp_path / DB_FILE).list_experiments() == []
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]  # no experiment directory


def test_runs_measured_before_a_failure_are_kept(tmp_path: Path):
    def one_then_fail(experiment, store, cpu_plan, *, events, driver, previous, **_):
        run = fake_run("base", "w", 1, experiment="refused")
        store.add(run)  # as the runner does: stored, then announced
        events.on_result(run)
        raise StackStartError("the second start failed")

    with pytest.raises(StackStartError):
        _session(tmp_path, one_then_fail).run()
    (row,) = Database(tmp_path / DB_FILE).list_experiments()
    assert row.runs == 1 and Path(row.experiment_dir).is_dir()


def test_result_files_are_rewritten_after_every_run(tmp_path: Path):
    """--export-json/--export-markdown/--export-csv: each file describes every run so far,
    so an interrupted experiment leaves them describing what was measured."""
    import csv
    import json

    experiment = experiment_from_dict(
        {
            "name": "files",
            "repetitions": 2,
            "slices": 1,  # runs in turn: each is finished before the next starts
            "baseline": {"name": "base"},
            "variants": [{"name": "fast", "proxy": {"transport": "unix"}}],
            "workloads": [{"name": "w", "request": {"path": "/"}, "load": {"duration_s": 2}}],
        }
    )
    files = {fmt: tmp_path / f"out.{fmt}" for fmt in ("json", "markdown", "csv")}
    seen: list[int] = []

    def level(variant, start, tick, workload):
        if files["json"].exists():
            seen.append(len(json.loads(files["json"].read_text())["runs"]))
        return (1300.0 if variant == "fast" else 1000.0) + tick % 3

    quiet = Console(file=io.StringIO())
    store = ExperimentSession(
        experiment, CpuPlan("0", "1", cpu_priority=False), tmp_path / "results",
        console=quiet, out=quiet, measure=fake_measure(level), result_files=files,
    ).run()
    assert seen and seen == sorted(seen) and seen[-1] < 4  # written while it ran
    document = json.loads(files["json"].read_text())
    assert len(document["runs"]) == 4
    assert {c["variant"] for c in document["comparisons"]} == {"fast"}
    rows = [r for r in csv.DictReader(files["csv"].read_text().splitlines())
            if not r.get("slice_pass")]
    assert {(r["variant"], r["repetition"]) for r in rows} == {
        ("base", "1"), ("base", "2"), ("fast", "1"), ("fast", "2")
    }
    assert files["markdown"].read_text().startswith("# files")
    assert not list(tmp_path.glob(".out.*.tmp"))  # written atomically
    assert store.path.is_dir()


def test_a_results_directory_copied_elsewhere_resumes_there_with_the_original_gone(
    tmp_path: Path,
):
    """--resume in a results directory copied elsewhere (the original removed) finds the
    unfinished experiment, and writes its runs and report under the copy."""
    import shutil

    def one_then_fail(experiment, store, cpu_plan, *, events, driver, previous, **_):
        run = fake_run("base", "w", 1, experiment="refused")
        store.add(run)
        events.on_result(run)
        raise StackStartError("the second start failed")

    old, new = tmp_path / "old", tmp_path / "new"
    with pytest.raises(StackStartError):
        _session(old, one_then_fail).run()
    shutil.copytree(old, new)
    shutil.rmtree(old)
    seen = []

    def the_rest(experiment, store, cpu_plan, *, events, driver, previous, **_):
        seen.append((store.path, len(previous)))
        run = fake_run("base", "w", 2, experiment="refused")
        store.add(run)
        events.on_result(run)
        return [run]

    session = _session(new, the_rest)
    session.resume = True
    store = session.run()
    assert seen == [(store.path, 1)] and store.path.parent == new.resolve()
    assert len(store.runs()) == 2 and (store.path / "report.md").is_file()
    assert len((store.path / "runs.jsonl").read_text().splitlines()) == 2
    assert not old.exists()


def test_a_finished_experiment_is_measured_further_by_its_id_with_its_runs_kept(
    tmp_path: Path,
):
    """``extend_id`` (bisect's retry of an unknown step): the finished experiment goes on,
    its runs handed to the runner and kept; an id not stored is one line."""
    from servelab.errors import ServelabError

    def measured(repetitions):
        def measure(experiment, store, cpu_plan, *, events, driver, previous, **_):
            seen.append(len(previous))
            runs = [fake_run("base", "w", r, experiment="refused") for r in repetitions]
            for run in runs:
                store.add(run)
                events.on_result(run)
            return runs

        return measure

    seen: list[int] = []
    first = _session(tmp_path, measured([1, 2])).run()
    session = _session(tmp_path, measured([3]))
    session.extend_id = first.id
    again = session.run()
    assert again.id == first.id and seen == [0, 2]
    assert [r.repetition for r in again.runs()] == [1, 2, 3]
    assert len(Database(tmp_path / DB_FILE).list_experiments()) == 1
    session.extend_id = 7
    with pytest.raises(ServelabError, match=r"no experiment #7 in .* to measure further"):
        session.run()


def _quick_session(out_dir: Path, *, detail: bool, width: int = 100, cpus: int = 2):
    """The quick study as `servelab study quick` runs it on a machine of ``cpus`` CPUs (in
    turns on 2, side by side on 16), measured by a fake executor."""
    from servelab.api import build_study
    from servelab.config.run import RunOptions
    from servelab.host.cpus import default_cpu_plan
    from servelab.studies import StudyOptions, get_study

    plan = replace(default_cpu_plan(frozenset(range(cpus))), cpu_priority=False)
    experiment, options = build_study(get_study("quick"), StudyOptions(), RunOptions(), plan)
    rng = random.Random(7)
    gains = {"nginx-tcp": 0.0, "nginx-unix": 0.2, "nginx-unix-keepalive": 0.3}

    def level(variant, start, tick, workload):
        return 1000 * math.exp(gains.get(variant, 0.0) + rng.gauss(0, 0.03))

    terminal, screen = io.StringIO(), io.StringIO()
    store = ExperimentSession(
        experiment, plan, out_dir,
        console=Console(file=terminal, width=width), out=Console(file=screen, width=width),
        measure=fake_measure(level), detail=detail, notes=options.notes,
    ).run()
    return store, terminal.getvalue(), screen.getvalue()


@pytest.mark.parametrize("cpus", [2, 16])
def test_the_default_terminal_output_is_one_screen_ending_on_the_answer(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, cpus: int
):
    """Issue 26: the default quick study printed ~420 lines, the answer buried. Now: the
    bar while measuring, then the summary at a glance and the answer, about one screen;
    the seed-style tables and the per-run lines only with -v (and in report.md)."""
    from servelab.report.answer import build_answer
    from servelab.report.base import ReportInput

    # --results as users give it: a relative directory, in a folder of a user's length (the
    # result's path is said in full, and pytest's own, longer under xdist, would wrap).
    short = Path(tempfile.mkdtemp(prefix="sl-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(short, ignore_errors=True))
    monkeypatch.chdir(short)
    store, progress, text = _quick_session(Path("servelab-results"), detail=False, cpus=cpus)
    lines = (progress + text).splitlines()
    assert len(lines) <= 45, "\n".join(lines)  # ~40 with a short --results path
    assert "Answer" in text and "Seed-style tables" not in text
    # Side by side the answer is per CPU second: no verdict on requests/s to contradict it;
    # in turns (2 CPUs, said on the console) the glance's verdicts are the answer's.
    assert ("vs baseline" in text[: text.index("Answer")]) is (cpus == 2)
    assert ("measuring in turns" in progress) is (cpus == 2)
    assert not [line for line in progress.splitlines() if " req/s, mean " in line]
    report = ReportInput.build(store.experiment, store.environment, store.runs())
    answer = build_answer(report.analysis)
    flat = " ".join(text.split())
    for workload in answer.workloads:  # the answer's own lines, as answer.py words them
        assert f"{workload.workload}: winner {workload.winner}" in flat
        for line in workload.lines:
            assert " ".join(line.text().split()) in flat
    assert text.index("At a glance") < text.index("Answer")  # the answer last
    assert flat.endswith(f"result {store.label}; report: {store.path / 'report.md'}")
    assert "Seed-style tables" in (store.path / "report.md").read_text()  # all of it there
    _, progress, verbose = _quick_session(Path("verbose"), detail=True)
    assert "Seed-style tables" in verbose and "Environment" in verbose
    assert len([line for line in progress.splitlines() if " req/s, mean " in line]) >= 6
    assert len((progress + verbose).splitlines()) > 2 * len(lines)


def _remote(repetitions: int):
    """An experiment of one stack and workload, measured ``repetitions`` times."""
    return experiment_from_dict(
        {
            "name": "remote",
            "baseline": {"name": "base"},
            "variants": [],
            "workloads": [{"name": "w", "load": {"duration_s": 2}}],
            "repetitions": repetitions,
        }
    )


def test_the_console_names_the_load_workers_on_other_machines_when_they_change():
    from support import fake_load

    from servelab.session import LiveProgress

    experiment = _remote(repetitions=4)
    screen = io.StringIO()
    live = LiveProgress(experiment, Console(file=screen, width=200), total=4, done=0, detail=False)
    said = ["2 on other machines (b: 2 processes)"] * 2 + ["1 on other machines (b: 1 process)"]
    for repetition, workers in enumerate([*said, None], start=1):
        details = {"workers": workers} if workers else {}
        live.show(fake_run("base", "w", repetition, load=fake_load(driver_details=details)))
    lines = [line.strip() for line in screen.getvalue().splitlines() if "load from" in line]
    assert lines == [
        "load from workers: 2 on other machines (b: 2 processes)",
        "load from workers: 1 on other machines (b: 1 process)",
    ]


def test_the_load_workers_are_named_as_the_run_starts_and_not_again_after_it():
    from support import fake_load

    from servelab.session import LiveProgress

    experiment = _remote(repetitions=2)
    screen = io.StringIO()
    live = LiveProgress(experiment, Console(file=screen, width=200), total=2, done=0, detail=True)
    events = live.events(lambda result: live.show(result))
    workers = "2 on other machines (b: 2 processes)"
    for repetition in (1, 2):
        events.on_driver(workers)  # the driver's watch, while the run goes
        events.on_result(fake_run(
            "base", "w", repetition, load=fake_load(driver_details={"workers": workers})
        ))
    lines = [line.strip() for line in screen.getvalue().splitlines() if line.strip()]
    named = [i for i, line in enumerate(lines) if line.startswith("load from workers")]
    assert [lines[i] for i in named] == [f"load from workers: {workers}"]
    first_run = next(i for i, line in enumerate(lines) if "req/s" in line)
    assert named[0] < first_run  # said before the run's own line, not after it
