"""The runner's schedule and stopping, with a fake executor (no servers started)."""

from __future__ import annotations

import random

from support import FakeClock, FakeExecutor, ListSink

from servelab.measuring import Runner, RunnerEvents
from servelab.prepare.building import experiment_from_dict


def experiment(
    *,
    slices=None,
    repetitions=2,
    stopping=None,
    duration=2.0,
    workloads=("w1", "w2"),
    side_by_side=False,
    switching=None,
    warmup=None,
):
    data = {
        "name": "fake",
        "repetitions": repetitions,
        "baseline": {"name": "base"},
        "variants": [{"name": "var", "proxy": {"transport": "unix"}}],
        "workloads": [
            {"name": w, "request": {"path": f"/{w}"}, "load": {"duration_s": duration}}
            for w in workloads
        ],
        "warmup": warmup or {"max_rounds": 1},
    }
    if slices is not None:
        data["slices"] = slices
    if stopping is not None:
        data["stopping"] = stopping
    if side_by_side:
        data["side_by_side"] = True
    if switching is not None:
        data["switching"] = switching
    return experiment_from_dict(data, source="test")


def test_slices_are_the_default_and_every_start_is_alive_for_its_passes():
    exp = experiment()
    assert exp.slices == 2  # 2 s runs: about one second a slice
    executor, sink = FakeExecutor(), ListSink()
    runs = Runner(exp, sink, executor).run()
    assert sink.runs == runs and len(runs) == 2 * 2 * 2
    launches = [i for i, e in enumerate(executor.log) if e[0] == "launch"]
    first_measure = next(i for i, e in enumerate(executor.log) if e[0] == "measure")
    assert len(launches) == 4 and max(launches) < first_measure  # the whole block first
    assert executor.stopped_blocks == 1
    for run in runs:
        assert run.slices == 2 and len(run.slice_figures) == 2
    # The slices of one pass share its number, per workload; two passes each.
    for workload in ("w1", "w2"):
        numbers = {s.pass_number for r in runs if r.workload == workload for s in r.slice_figures}
        assert numbers == {1, 2}


def test_sequential_runs_start_measure_and_stop_each_stack_in_turn():
    exp = experiment(slices=1)
    executor = FakeExecutor()
    runs = Runner(exp, ListSink(), executor).run()
    assert len(runs) == 8 and all(not r.slice_figures for r in runs)
    kinds = [e[0] for e in executor.log if e[0] != "warm"]
    assert kinds == ["launch", "measure", "measure", "stop"] * 4


def test_resume_measures_only_what_is_missing():
    exp = experiment()
    first = Runner(exp, ListSink(), FakeExecutor()).run()
    kept = [r for r in first if r.repetition == 1]
    executor = FakeExecutor()
    again = Runner(exp, ListSink(), executor, previous=kept).run()
    assert {(r.variant, r.workload, r.repetition) for r in again} == {
        (r.variant, r.workload, 2) for r in kept
    }
    # Pass numbers continue after the stored ones.
    assert min(s.pass_number for r in again for s in r.slice_figures) == 3


def noisy(sd_start: float, effect: float = 0.0, seed: int = 0, quiet: str = ""):
    """Requests/s with a level per start (sd_start) and a small slice noise; workload
    ``quiet`` has a doubling and hardly any noise, so it is clear at once."""
    rng = random.Random(seed)
    levels: dict[int, float] = {}

    def level(variant, start, tick, workload):
        if workload == quiet:
            return 2000.0 if variant == "var" else 1000.0 + tick % 2
        if start not in levels:
            levels[start] = rng.gauss(0, sd_start)
        shift = effect if variant == "var" else 0.0
        return 1000.0 * (1 + shift + levels[start] + rng.gauss(0, 0.002))

    return level



def test_only_the_rounds_asked_for_are_measured_gaps_before_them_stay_gaps():
    """tune's profiled starts: repetitions 4 and 5 only, though 2 and 3 were never
    measured (a finalist dropped from the race after its first round)."""
    for slices in (None, 1):
        exp = experiment(slices=slices, repetitions=5, workloads=("w1",))
        kept = Runner(exp.model_copy(update={"repetitions": 1}), ListSink(),
                      FakeExecutor()).run()
        runs = Runner(exp, ListSink(), FakeExecutor(), previous=kept,
                      only_rounds=[4, 5]).run()
        assert sorted((r.variant, r.repetition) for r in runs) == [
            ("base", 4), ("base", 5), ("var", 4), ("var", 5)
        ]

def test_a_clear_answer_stops_after_the_first_block():
    clock = FakeClock()
    executor = FakeExecutor(noisy(0.002, effect=0.2), clock=clock)
    decisions = []
    events = RunnerEvents(on_round=lambda plan, outlook: decisions.append((plan, outlook)))
    # 7 starts: the 6 degrees of freedom a clear answer needs (stats.MIN_CLEAR_DF).
    exp = experiment(stopping={"precision_pct": 3, "budget_s": 200}, repetitions=7)
    runs = Runner(exp, ListSink(), executor, events, clock=clock).run()
    assert {r.repetition for r in runs} == set(range(1, 8))
    assert decisions[-1][0] is None
    assert decisions[-1][1].reason == "every requests per second comparison is clear"


def test_an_unclear_answer_adds_rounds_until_the_budget_is_spent():
    clock = FakeClock()
    executor = FakeExecutor(noisy(0.05, seed=1), clock=clock, seconds_per_window=1.0)
    decisions = []
    events = RunnerEvents(on_round=lambda plan, outlook: decisions.append((plan, outlook)))
    exp = experiment(stopping={"precision_pct": 1, "budget_s": 40}, repetitions=2)
    runs = Runner(exp, ListSink(), executor, events, clock=clock).run()
    rounds = max(r.repetition for r in runs)
    assert rounds > 2  # rounds were added
    assert clock.now <= 40  # and none started that would overrun the budget
    plans = [plan for plan, _ in decisions if plan is not None]
    assert len(plans) == rounds - 2
    last = decisions[-1][1]
    assert "budget" in last.reason and last.unclear and last.more_starts > 0
    # Every added round starts every variant afresh.
    assert executor.starts == 2 * rounds


def test_only_unclear_workloads_get_another_round():
    clock = FakeClock()
    executor = FakeExecutor(noisy(0.05, seed=2, quiet="w1"), clock=clock)
    # 7 starts: the 6 degrees of freedom a clear answer needs (stats.MIN_CLEAR_DF).
    exp = experiment(stopping={"precision_pct": 0.5, "budget_s": 90}, repetitions=7)
    runs = Runner(exp, ListSink(), executor, clock=clock).run()
    later = [r for r in runs if r.repetition > 7]
    assert later and {r.workload for r in later} == {"w2"}


def test_side_by_side_rounds_take_turns_at_going_first():
    exp = experiment(side_by_side=True, repetitions=4)
    executor = FakeExecutor()
    Runner(exp, ListSink(), executor).run()
    firsts = [
        executor.log[i][1]
        for i, entry in enumerate(executor.log)
        if entry[0] == "launch" and (i == 0 or executor.log[i - 1][0] != "launch")
    ]
    assert firsts == ["base", "var", "base", "var"]


def test_a_stack_that_leaves_its_cpu_idle_turns_side_by_side_into_turns():
    """Side by side, each stack is first driven alone for a moment: one that keeps only
    half its CPU busy (it waits) makes the rest of the experiment measured in turns,
    said as a note, and the analysis compares requests/s of the runs measured so."""
    from servelab.analysis.analyze import analyze
    from servelab.analysis.metrics import answer_metric
    from servelab.analysis.warnings import WarningKind

    notes: list[str] = []
    executor = FakeExecutor(
        lambda variant, start, tick, workload: 1200.0 if variant == "var" else 1000.0,
        busy=lambda variant, workload: 0.5 if variant == "var" else 1.0,
    )
    exp = experiment(side_by_side=True, repetitions=3)
    runs = Runner(exp, ListSink(), executor, RunnerEvents(on_note=notes.append)).run()
    (note,) = notes
    assert "var alone kept 50 % of its CPUs busy" in note and "in turns" in note
    probed = [r for r in runs if r.solo_cpu_share is not None]
    assert {r.solo_cpu_share for r in probed} == {0.5, 1.0}
    assert {(r.workload, r.repetition) for r in probed} == {("w1", 1)}  # once, then turns
    assert [r.together for r in runs if (r.workload, r.repetition) == ("w1", 1)] == [
        False, False
    ]  # the probe came before the passes: this round's already measured in turns
    assert all(r.together is False for r in runs)
    analysis = analyze(exp, runs)
    assert not analysis.experiment.side_by_side
    assert answer_metric(analysis.experiment).key == "rps"
    assert any(w.kind is WarningKind.NOT_CPU_BOUND for w in analysis.warnings)
    rps = analysis.for_workload("w1")[1].comparisons["rps"]
    assert rps.verdict != "not judged" and rps.difference_pct > 15


def test_busy_stacks_stay_side_by_side_and_resume_keeps_the_decision():
    executor = FakeExecutor()
    exp = experiment(side_by_side=True, repetitions=2)
    runs = Runner(exp, ListSink(), executor).run()
    assert all(r.together is True for r in runs)
    assert sum(r.solo_cpu_share is not None for r in runs) == 2 * 2  # each stack, each workload
    # A result that switched to turns resumes in turns, probing nothing again.
    apart = [r.model_copy(update={"together": False}) for r in runs[:2]]
    resumed = Runner(exp, ListSink(), FakeExecutor(), previous=apart).run()
    assert resumed and all(r.together is False for r in resumed)
    assert all(r.solo_cpu_share is None for r in resumed)


def test_in_turns_the_next_round_is_foreseen_at_the_pace_of_one_round():
    # A block in turns holds several rounds: the time per pass must count each of them,
    # else the next round looks as long as the whole block and the budget stops early.
    clock = FakeClock()
    executor = FakeExecutor(noisy(0.05, seed=3), clock=clock, seconds_per_window=1.0)
    seen = []
    events = RunnerEvents(on_round=lambda plan, outlook: seen.append((plan, clock.now)))
    exp = experiment(stopping={"precision_pct": 0.1, "budget_s": 60}, repetitions=3)
    Runner(exp, ListSink(), executor, events, clock=clock).run()
    (first, first_at), (_, second_at) = seen[0], seen[1]
    assert first is not None
    taken = second_at - first_at  # the first added round, measured
    assert taken > 0 and abs(first.expected_s - taken) <= 0.25 * taken


def switchable_executor(level=None) -> FakeExecutor:
    executor = FakeExecutor(level)
    executor.driver.switchable = executor.driver.keep_latencies = True
    return executor


def test_switched_passes_visit_every_start_in_turn_and_keep_one_slice_a_pass():
    """In turns with ``switching``, each workload's passes go to the executor at once:
    per pass the round's starts in the rotated order, repeated to fill a 1 s slice in
    0.5 s turns; each run keeps a slice per pass, numbered as before, marked switched."""
    notes: list[str] = []
    exp = experiment(switching=True, workloads=("w1",))
    executor = switchable_executor(lambda variant, start, tick, workload: 2000.0)
    runs = Runner(exp, ListSink(), executor, RunnerEvents(on_note=notes.append)).run()
    assert len(runs) == 4 and all(r.switched is True for r in runs)
    assert [e for e in executor.log if e[0] == "measure"] == []  # nothing driven anew
    assert executor.turns == [[0, 1, 2, 3, 0, 1, 2, 3], [1, 2, 3, 0, 1, 2, 3, 0]]
    for run in runs:
        assert run.slices == 2 and [s.pass_number for s in run.slice_figures] == [1, 2]
    (note,) = notes
    assert note.startswith("w1: passes switched between the stacks every 0.5 s")


def test_a_stack_too_slow_to_drain_keeps_the_driver_started_anew_and_says_why():
    """2000 requests/s drain the default 100 requests in flight in 0.05 s; 200 take
    0.5 s, more than the 0.15 s a switch leaves: with most starts that slow, not
    switched, for the whole workload."""
    notes: list[str] = []
    exp = experiment(switching=True, workloads=("w1",), repetitions=3)
    executor = switchable_executor(
        lambda variant, start, tick, workload: 2000.0 if start == 1 else 200.0
    )
    runs = Runner(exp, ListSink(), executor, RunnerEvents(on_note=notes.append)).run()
    assert all(r.switched is False for r in runs)
    assert not any(e[0] == "switched" for e in executor.log)
    (note,) = notes
    assert "passes not switched" in note and "0.50 s to serve 100 requests" in note


def test_a_warm_up_of_a_duration_goes_in_switched_turns_where_passes_may_switch():
    """quick's warm-up (one round of 0.5 s): with switching, every start's warm-up is a
    turn of one stretch (a driver each, started at once), not a driver started anew per
    start; its rates decide the passes (here fast: switched) and are recorded."""
    exp = experiment(
        switching=True, workloads=("w1",), warmup={"max_rounds": 1, "duration_s": 0.5}
    )
    executor = switchable_executor(lambda variant, start, tick, workload: 2000.0)
    runs = Runner(exp, ListSink(), executor).run()
    assert not any(e[0] in ("warm", "measure") for e in executor.log)
    warm_up, passes = executor.stretches
    assert warm_up == [[0, 1, 2, 3]]  # one 0.5 s turn each
    assert passes == [[0, 1, 2, 3, 0, 1, 2, 3], [1, 2, 3, 0, 1, 2, 3, 0]]
    assert all(r.switched is True and len(r.warmup_rps) == 1 for r in runs)
    assert all(r.warmup_rps[0] == 2000.0 and r.warmup_requests == 1000 for r in runs)


def test_a_switched_warm_up_that_finds_slow_stacks_leaves_the_passes_anew():
    """The warm-up turns' rates (200 requests/s: 0.5 s to drain 100) decide against
    switching: the passes start a driver anew per slice, and the warm-up is not sent
    again; a rate that does not settle gets another round (up to max_rounds)."""
    notes: list[str] = []
    exp = experiment(
        switching=True, workloads=("w1",),
        warmup={"max_rounds": 3, "duration_s": 0.5, "settle_pct": 5},
    )
    executor = switchable_executor(
        lambda variant, start, tick, workload: 200.0 if start != 1 else 150.0 + 50 * tick
    )
    runs = Runner(exp, ListSink(), executor, RunnerEvents(on_note=notes.append)).run()
    assert all(r.switched is False for r in runs)
    assert not any(e[0] == "warm" for e in executor.log)
    # Settled takes two rounds; the first start (150, 350, ... requests/s) does not
    # settle in them: round 3 is its alone.
    assert executor.stretches == [[[0, 1, 2, 3]], [[0, 1, 2, 3]], [[0]]]
    assert sorted(len(r.warmup_rps) for r in runs) == [2, 2, 2, 3]
    assert any(e[0] == "measure" for e in executor.log)
    (note,) = notes
    assert "passes not switched" in note


def test_switching_is_only_where_it_was_asked_for_and_the_driver_can():
    fast = lambda variant, start, tick, workload: 2000.0  # noqa: E731
    assert experiment(workloads=("w1",)).switching is True  # a new experiment's default
    plain = Runner(
        experiment(switching=False, workloads=("w1",)), ListSink(), switchable_executor(fast)
    ).run()
    assert all(r.switched is None for r in plain)
    cannot = Runner(
        experiment(switching=True, workloads=("w1",)), ListSink(), FakeExecutor()
    ).run()
    assert all(r.switched is False for r in cannot)
