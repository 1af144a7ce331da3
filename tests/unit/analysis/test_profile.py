"""Folded stacks to CPU per request, by part and function, and against the baseline
(synthetic profiles: no py-spy)."""

from __future__ import annotations

import pytest
from support import fake_load, fake_run

from servelab.analysis.explain import (
    answer_line,
    covering,
    explain,
    explain_all,
    inclusive,
    why_lines,
)
from servelab.analysis.profile import (
    KERNEL,
    NOT_PROFILED,
    RunProfile,
    frame_function,
    mean_stacks,
    parse_folded,
    part_cpu_s,
    run_profile,
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


def test_system_time_is_a_kernel_line_and_samples_share_the_user_time() -> None:
    worker = ProcessUsage(role="app", pid=11, name="w", cpu_s=1.5, peak_rss_bytes=0,
                          system_s=0.5)
    master = ProcessUsage(role="app", pid=10, name="m", cpu_s=0.0, peak_rss_bytes=0,
                          system_s=0.0)
    front = ProcessUsage(role="nginx", pid=5, name="nginx", cpu_s=0.4, peak_rss_bytes=0,
                         system_s=0.3)
    run = fake_run(
        "v", "w", 1, load=fake_load(requests=1000), processes=(front, master, worker),
        profile=ProfileInfo(file="f", samples=0, rate_hz=100, masters=(10,)),
    )
    folded = ("app workers;main (srv.py:1);serialise (app.py:3) 60\n"
              "app workers;main (srv.py:1);send (srv.py:9) 40\n")
    profile = run_profile(run, folded)
    assert profile.stacks[("app workers", KERNEL)] == pytest.approx(500.0)
    assert profile.stacks[("nginx", KERNEL)] == pytest.approx(300.0)
    functions = profile.functions()
    assert functions["serialise (app.py)"] == pytest.approx(600.0)  # 60 % of 1000 user
    assert functions["send (srv.py)"] == pytest.approx(400.0)
    assert functions[f"nginx {NOT_PROFILED}"] == pytest.approx(100.0)
    assert sum(profile.stacks.values()) == pytest.approx(profile.total)
    # 100 samples at 100 Hz (1 s) for the workers' 1.5 CPU seconds
    assert profile.waited() == pytest.approx(1.0 / 1.5)


def test_without_system_time_the_samples_share_all_of_the_cpu() -> None:
    profile = _run("slow", 1, 0.05)  # its processes recorded no system time
    assert not any(KERNEL in stack for stack in profile.stacks)
    assert profile.functions()["handle (app.py)"] == pytest.approx(1000.0)


def test_the_note_says_when_threads_waited_for_a_cpu() -> None:
    def run(variant: str, repetition: int) -> RunProfile:
        record = fake_run(
            variant, "w", repetition, load=fake_load(requests=100),
            processes=(usage("app", 10, 0.1),),
            profile=ProfileInfo(file="f", samples=0, rate_hz=100, masters=(10,)),
        )
        return run_profile(record, "app master;serve (srv.py:3) 30\n")  # 0.3 s for 0.1

    explanation = explain([run("a", 1), run("a", 2)], [run("b", 1), run("b", 2)])
    assert explanation is not None and explanation.waited == pytest.approx(3.0)
    assert any("3.0 s per CPU second" in line for line in why_lines(explanation))
    alone = explain([_run("base", 1, 0.0)], [_run("slow", 1, 0.05)])
    assert alone is not None and alone.waited == pytest.approx(1.0)  # 100 Hz, no waits
    assert not any("per CPU second" in line for line in why_lines(alone))


def test_inclusive_counts_each_function_once_per_stack() -> None:
    stacks = {
        ("app", "main (s.py:1)", "f (a.py:2)", "f (a.py:2)", "g (a.py:5)"): 10.0,
        ("app", "main (s.py:1)", "h (a.py:9)"): 5.0,
        ("nginx", NOT_PROFILED): 7.0,
        ("app", KERNEL): 3.0,
    }
    assert inclusive(stacks) == pytest.approx({
        "main (s.py)": 15.0, "f (a.py)": 10.0, "g (a.py)": 10.0, "h (a.py)": 5.0,
        f"nginx {NOT_PROFILED}": 7.0, f"app {KERNEL}": 3.0,
    })


def _folded_run(variant: str, repetition: int, lines: dict[str, float]) -> RunProfile:
    """One app process whose CPU (µs per request, 1000 requests) is ``lines``' values."""
    cpu_s = sum(lines.values()) / 1000
    run = fake_run(
        variant, "w", repetition, load=fake_load(requests=1000),
        processes=(usage("app", 10, cpu_s),),
        profile=ProfileInfo(file="f", samples=0, rate_hz=100, masters=(10,)),
    )
    return run_profile(run, "".join(f"app master;{s} {v}\n" for s, v in lines.items()))


def _app(piece: float, lex: float, tree: float) -> dict[str, float]:
    """main() calls render() (five pieces of ``piece`` each), parse() (lex and tree) and
    idle()."""
    pieces = {f"main (m.py:1);render (r.py:2);piece{i} (r.py:{i})": piece for i in range(5)}
    return pieces | {
        "main (m.py:1);parse (p.py:1);lex (p.py:5)": lex,
        "main (m.py:1);parse (p.py:1);tree (p.py:9)": tree,
        "main (m.py:1);idle (m.py:7)": 300.0,
    }


# A difference spread over a caller's many callees, and two large self-time changes of
# opposite signs under another caller, which nearly cancel: +40 and +5 = +45 in all.
BASE = _app(20.0, 100.0, 100.0)
SLOW = _app(28.0, 130.0, 75.0)


def test_the_inclusive_view_explains_what_opposite_self_times_leave() -> None:
    noise = [0.0, 1.0, -1.0]
    baseline = [_folded_run("base", n, BASE) for n in (1, 2, 3)]
    variant = [
        _folded_run("slow", n, {k: v + e for k, v in SLOW.items()})
        for n, e in zip((1, 2, 3), noise, strict=True)
    ]
    explanation = explain(baseline, variant, top=5)
    assert explanation is not None
    assert explanation.total.difference == pytest.approx(45.0, abs=0.1)
    self_top2 = sum(c.difference for c in explanation.functions[:2])
    assert [c.name for c in explanation.functions[:2]] == ["lex (p.py)", "tree (p.py)"]
    assert abs(explanation.total.difference - self_top2) > 35  # +30 and -25 cancel
    names = [c.name for c in explanation.inclusive]
    assert names[:2] == ["render (r.py)", "parse (p.py)"]  # not main, which holds both
    assert sum(c.difference for c in explanation.inclusive[:2]) == pytest.approx(45.0, abs=0.1)
    assert abs(explanation.inclusive_unexplained) < 0.1
    line = answer_line(explanation)
    assert "in render (r.py) with callees" in line and "in parse (p.py) with callees" in line
    assert any("functions with their callees" in ln for ln in why_lines(explanation))


def test_covering_counts_no_stack_twice() -> None:
    baseline = [_folded_run("base", n, BASE) for n in (1, 2)]
    variant = [_folded_run("slow", n, SLOW) for n in (1, 2)]
    covered = covering(baseline, variant, top=10)
    names = [c.name for c in covered]
    assert "main (m.py)" not in names  # every other line's caller
    assert not {"lex (p.py)", "tree (p.py)"} & set(names)  # parse's callees
    assert not any(name.startswith("piece") for name in names)  # render's
    assert sum(c.difference for c in covered) == pytest.approx(45.0)
    assert covering(baseline, baseline) == ()  # nothing to explain: no line


def test_answer_line_keeps_self_times_where_they_explain_more() -> None:
    baseline = [_run("base", n, 0.0) for n in range(1, 4)]
    variant = [_run("slow", n, 0.05) for n in range(1, 4)]
    explanation = explain(baseline, variant)
    assert explanation is not None
    line = answer_line(explanation)
    assert "in spin (app.py);" in line and "with callees" not in line


def test_a_function_that_is_its_whole_part_is_no_line() -> None:
    # Every piece grows alike: only main() holds the whole difference, and main() is
    # all of the worker; "by part" says that already.
    baseline = [_folded_run("base", n, _app(20.0, 100.0, 100.0)) for n in (1, 2)]
    variant = [_folded_run("slow", n, _app(24.0, 120.0, 120.0)) for n in (1, 2)]
    names = [c.name for c in covering(baseline, variant)]
    assert names and "main (m.py)" not in names
    assert "main (m.py)" in [c.name for c in covering(baseline, variant, whole=1.01)]
