"""--profile in the runner (a fake executor): each run's windows' folded stacks are
merged, written once beside the results before the record that names them, and a
profiler's problem is said once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from support import FakeExecutor, ListSink

from servelab.measuring import Runner, RunnerEvents
from servelab.observe.profile import WindowProfile
from servelab.prepare.building import experiment_from_dict
from servelab.results.profiles import read_profiles, write_profile


class ProfilingExecutor(FakeExecutor):
    """Every window comes with 3 samples of one stack, and the same complaint."""

    def _window(self, stack, workload, load):
        window = super()._window(stack, workload, load)
        profile = WindowProfile(
            {f"app workers;handle;{stack.variant}": 3}, (stack.start,), ("py-spy: oops",)
        )
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


def test_a_runs_slices_make_one_profile_file(tmp_path: Path) -> None:
    experiment = experiment_from_dict({
        "name": "p", "repetitions": 2, "slices": 2, "baseline": {"name": "base"},
        "variants": [{"name": "var x", "proxy": {"transport": "unix"}}],
        "workloads": [{"name": "w", "request": {"path": "/"}, "load": {"duration_s": 2.0}}],
        "warmup": {"max_rounds": 1},
    }, source="test")
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
