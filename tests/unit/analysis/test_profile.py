"""Folded stacks to CPU per request, by part and function, and against the baseline
(synthetic profiles: no py-spy)."""

from __future__ import annotations

import pytest
from support import fake_load, fake_run

from servelab.analysis.profile import (
    NOT_PROFILED,
    explain,
    explain_all,
    frame_function,
    mean_stacks,
    parse_folded,
    part_cpu_s,
    run_profile,
    why_lines,
)
from servelab.results.records import ProcessUsage, ProfileInfo


def usage(role: str, pid: int, cpu_s: float) -> ProcessUsage:
    return ProcessUsage(role=role, pid=pid, name=role, cpu_s=cpu_s, peak_rss_bytes=0)


def test_parse_folded_adds_repeats_and_skips_other_lines() -> None:
    text = "a;b (x.py:3) 2\na;b (x.py:3) 3\nnot a stack\n\nc 1.5\n"
    assert parse_folded(text) == {("a", "b (x.py:3)"): 5.0, ("c",): 1.5}


def test_frame_function_leaves_out_the_line() -> None:
    assert frame_function("handle (app/views.py:12)") == "handle (app/views.py)"
    assert frame_function("<module> (x.py)") == "<module> (x.py)"


def test_parts_split_master_from_workers() -> None:
    processes = (usage("nginx", 5, 0.5), usage("app", 10, 0.1), usage("app", 11, 1.0),
                 usage("app", 12, 0.9))
    assert part_cpu_s(processes, masters=(10,)) == pytest.approx(
        {"nginx": 0.5, "app master": 0.1, "app workers": 1.9}
    )


def _run(variant: str, repetition: int, spin_s: float, *, requests: int = 1000):
    """A stack of nginx and one app worker under a master; the worker's samples split
    between handle() and (in a slow variant) spin()."""
    worker_s = 1.0 + spin_s
    processes = (usage("nginx", 5, 0.4), usage("app", 10, 0.02), usage("app", 11, worker_s))
    run = fake_run(
        variant, "w", repetition, load=fake_load(requests=requests), processes=processes,
        profile=ProfileInfo(file="f", samples=0, rate_hz=100, masters=(10,)),
    )
    handle = round(100 * 1.0)
    spin = round(100 * spin_s)
    folded = f"app workers;main (srv.py:1);handle (app.py:7) {handle}\n"
    if spin:
        folded += f"app workers;main (srv.py:1);handle (app.py:7);spin (app.py:20) {spin}\n"
    folded += "app master;loop (srv.py:9) 2\n"
    return run_profile(run, folded)


def test_a_run_adds_up_to_its_stack_cpu_per_request() -> None:
    profile = _run("slow", 1, 0.05)
    assert profile.total == pytest.approx(1e6 * (0.4 + 0.02 + 1.05) / 1000)
    assert sum(profile.stacks.values()) == pytest.approx(profile.total)
    assert profile.stacks[("nginx", NOT_PROFILED)] == pytest.approx(400.0)
    functions = profile.functions()
    assert functions["spin (app.py)"] == pytest.approx(50.0)
    assert functions["handle (app.py)"] == pytest.approx(1000.0)
    assert functions[f"nginx {NOT_PROFILED}"] == pytest.approx(400.0)


def test_the_planted_function_explains_the_difference() -> None:
    baseline = [_run("base", n, 0.0) for n in range(1, 5)]
    noise = [0.048, 0.051, 0.050, 0.052]
    variant = [_run("slow", n, s) for n, s in enumerate(noise, 1)]
    explanation = explain(baseline, variant, top=3)
    assert explanation is not None
    top = explanation.functions[0]
    assert top.name == "spin (app.py)"
    low, high = top.comparison.interval
    assert low < 50.0 < high
    assert explanation.total.difference == pytest.approx(1e3 * sum(noise) / 4, rel=1e-6)
    assert explanation.parts[0].name == "app workers"
    assert abs(explanation.unexplained) < 1.0  # the lines shown explain it all
    lines = why_lines(explanation)
    assert lines[0].startswith("slow vs base (w): stack CPU")
    assert lines[1].startswith("  by part: app workers 1050.")
    assert "in spin (app.py)" in lines[2]
    assert lines[-1].endswith("µs/request unexplained (the rest)")


def test_a_single_process_server_is_one_part() -> None:
    run = fake_run(
        "v", "w", 1, load=fake_load(requests=100), processes=(usage("app", 10, 0.1),),
        profile=ProfileInfo(file="f", samples=0, rate_hz=100, masters=(10,)),
    )
    profile = run_profile(run, "app master;serve (srv.py:3) 10\n")
    assert profile.parts == pytest.approx({"app": 1000.0})
    assert profile.stacks == pytest.approx({("app", "serve (srv.py:3)"): 1000.0})


def test_explain_all_pairs_each_variant_with_the_baseline() -> None:
    profiles = [_run("base", 1, 0.0), _run("slow", 1, 0.05), _run("base", 2, 0.0),
                _run("slow", 2, 0.05)]
    [explanation] = explain_all(profiles, "base")
    assert explanation.variant == "slow" and explanation.starts == (2, 2)
    assert explain_all(profiles[:1], "base") == []
    assert mean_stacks(profiles[:1]) == profiles[0].stacks


def test_threads_waiting_on_a_lock_are_left_out() -> None:
    run = fake_run(
        "v", "w", 1, load=fake_load(requests=100), processes=(usage("app", 10, 0.1),),
        profile=ProfileInfo(file="f", samples=0, rate_hz=100, masters=(10,)),
    )
    folded = (
        "app master;serve (srv.py:3) 10\n"
        "app master;Thread._bootstrap (threading.py:1002);Queue.get (queue.py:171);"
        "Condition.wait (threading.py:327) 40\n"
        "app master;_worker (concurrent/futures/thread.py:81) 5\n"
        "app master;_worker (concurrent/futures/thread.py:58);job (app.py:4) 10\n"
    )
    profile = run_profile(run, folded)
    assert profile.functions() == pytest.approx({"serve (srv.py)": 500.0, "job (app.py)": 500.0})
