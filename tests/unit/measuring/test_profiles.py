"""--profile in the runner (a fake executor): each run's windows' folded stacks are
merged, written once beside the results before the record that names them, and a
profiler's problem is said once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from support import FakeExecutor, ListSink

from servelab.config.load import LoadSpec
from servelab.config.stack import StackSpec
from servelab.measuring import Runner, RunnerEvents
from servelab.measuring.host import uncrowded_concurrency
from servelab.observe.profile import WindowProfile
from servelab.prepare.building import experiment_from_dict
from servelab.results.profiles import read_profiles, write_profile
from servelab.results.records import ProcessUsage


class ProfilingExecutor(FakeExecutor):
    """Every window comes with 3 samples of one stack, and the same complaint; ``crowded``:
    profiled at one connection, 50 requests and 0.1 s of CPU of its process 7."""

    def __init__(self, crowded: bool = False) -> None:
        super().__init__()
        self.crowded = crowded

    def _window(self, stack, workload, load):
        window = super()._window(stack, workload, load)
        profile = WindowProfile(
            {f"app workers;handle;{stack.variant}": 3}, (stack.start,), ("py-spy: oops",)
        )
        if self.crowded:
            used = ProcessUsage(role="app", pid=7, name="python", cpu_s=0.1, peak_rss_bytes=1,
                                system_s=0.02)
            profile = dataclasses.replace(profile, usage=(used,), requests=50, concurrency=1)
        return dataclasses.replace(window, profile=profile)


class ProfileSink(ListSink):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.written: list[str] = []

    def write_profile(self, relative: str, stacks: dict[str, int]) -> None:
        assert relative not in {r.profile.file for r in self.runs}  # before its record
        self.written.append(relative)
        write_profile(self.path, relative, stacks)


def _sliced():
    return experiment_from_dict({
        "name": "p", "repetitions": 2, "slices": 2, "baseline": {"name": "base"},
        "variants": [{"name": "var x", "proxy": {"transport": "unix"}}],
        "workloads": [{"name": "w", "request": {"path": "/"}, "load": {"duration_s": 2.0}}],
        "warmup": {"max_rounds": 1},
    }, source="test")


def test_a_runs_slices_make_one_profile_file(tmp_path: Path) -> None:
    experiment = _sliced()
    notes: list[str] = []
    sink = ProfileSink(tmp_path)
    runs = Runner(
        experiment, sink, ProfilingExecutor(), RunnerEvents(on_note=notes.append)
    ).run()
    assert len(runs) == 4 and len(sink.written) == 4
    assert notes == ["py-spy: oops"]  # said once, kept in every record
    for run in runs:
        assert run.profile is not None and run.profile.samples == 6  # 2 slices x 3
        assert run.profile.problems == ("py-spy: oops",)
    assert runs[0].profile.file == "profiles/base/w/start-1.folded"
    texts = read_profiles(tmp_path, runs)
    assert texts[("var x", "w", 2)] == "app workers;handle;var x 6\n"
    assert (tmp_path / "profiles" / "var-x" / "w" / "start-2.folded").is_file()


def test_a_crowded_runs_profiling_windows_add_up_per_process(tmp_path: Path) -> None:
    """Profiled at a concurrency of its own: each slice's profiling window's CPU (per
    process) and requests added up in the record, which the samples are scaled to."""
    runs = Runner(_sliced(), ProfileSink(tmp_path), ProfilingExecutor(crowded=True),
                  RunnerEvents()).run()
    for run in runs:
        assert run.profile is not None and run.profile.concurrency == 1
        assert run.profile.requests == 100
        [process] = run.profile.processes
        assert (process.pid, process.cpu_s, process.system_s) == (7, pytest.approx(0.2),
                                                                  pytest.approx(0.04))


def _stack(workers: int, threads: int = 1) -> StackSpec:
    return StackSpec.model_validate(
        {"name": "s", "server": {"kind": "gunicorn", "workers": workers, "threads": threads}}
    )


@pytest.mark.parametrize(("workers", "threads", "cpus", "concurrency", "expected"), [
    (4, 1, 1, 10, 1),  # issue 37's crowded stack: 4 workers on one CPU
    (1, 1, 1, 10, None),  # one worker (asyncio): one thread to run
    (2, 1, 1, 1, None),  # one connection keeps one worker busy
    (2, 1, 1, 2, 1),  # quick's stacks: two workers on a CPU each
    (9, 1, 4, 100, 4),  # gunicorn's 2 x CPUs + 1 on a 4-CPU slot
    (8, 1, 16, 256, None),  # fewer workers than CPUs
    (2, 8, 8, 64, 8),  # gthread: 16 threads on 8 CPUs
    (33, 1, 32, 20, None),  # a 64-CPU machine's half, 20 connections
])
def test_a_stack_is_profiled_uncrowded_where_more_threads_than_cpus_could_be_busy(
    workers: int, threads: int, cpus: int, concurrency: int, expected: int | None
) -> None:
    load = LoadSpec(concurrency=concurrency, duration_s=2.0)
    assert uncrowded_concurrency(_stack(workers, threads), cpus, load) == expected
