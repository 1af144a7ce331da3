"""A variant's CPU per request against the baseline's, by part and function, and its
wording (synthetic profiles: no py-spy)."""

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
from servelab.analysis.profile import KERNEL, NOT_PROFILED, RunProfile, mean_stacks, run_profile
from servelab.results.records import ProfileInfo

from .profiles import PLANTED, app_lines, folded_run, planted_run, sampled_run, usage


def test_the_planted_function_explains_the_difference() -> None:
    baseline = [sampled_run("base", n, 0.0) for n in range(1, 5)]
    noise = [0.048, 0.051, 0.050, 0.052]
    variant = [sampled_run("slow", n, s) for n, s in enumerate(noise, 1)]
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


def test_explain_all_pairs_each_variant_with_the_baseline() -> None:
    profiles = [sampled_run("base", 1, 0.0), sampled_run("slow", 1, 0.05),
                sampled_run("base", 2, 0.0), sampled_run("slow", 2, 0.05)]
    [explanation] = explain_all(profiles, "base")
    assert explanation.variant == "slow" and explanation.starts == (2, 2)
    assert explain_all(profiles[:1], "base") == []
    assert mean_stacks(profiles[:1]) == profiles[0].stacks


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
    alone = explain([sampled_run("base", 1, 0.0)], [sampled_run("slow", 1, 0.05)])
    assert alone is not None and alone.waited == pytest.approx(1.0)  # 100 Hz, no waits
    assert not any("per CPU second" in line for line in why_lines(alone))


def test_the_note_says_when_a_crowded_stack_was_profiled_at_its_own_concurrency() -> None:
    import dataclasses

    baseline = [dataclasses.replace(sampled_run("base", n, 0.0), concurrency=2) for n in (1, 2)]
    variant = [dataclasses.replace(sampled_run("slow", n, 0.05), concurrency=2) for n in (1, 2)]
    explanation = explain(baseline, variant)
    assert explanation is not None and explanation.profiled_at == 2
    assert any("profiled at 2 connections, as many as the stack's CPUs" in line
               for line in why_lines(explanation))
    plain = explain([sampled_run("base", 1, 0.0)], [sampled_run("slow", 1, 0.05)])
    assert plain is not None and plain.profiled_at is None
    assert not any("profiled at" in line for line in why_lines(plain))


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


# A difference spread over a caller's many callees, and two large self-time changes of
# opposite signs under another caller, which nearly cancel: +40 and +5 = +45 in all.
BASE = app_lines(20.0, 100.0, 100.0)


SLOW = app_lines(28.0, 130.0, 75.0)


def test_the_inclusive_view_explains_what_opposite_self_times_leave() -> None:
    noise = [0.0, 1.0, -1.0]
    baseline = [folded_run("base", n, BASE) for n in (1, 2, 3)]
    variant = [
        folded_run("slow", n, {k: v + e for k, v in SLOW.items()})
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
    baseline = [folded_run("base", n, BASE) for n in (1, 2)]
    variant = [folded_run("slow", n, SLOW) for n in (1, 2)]
    covered = covering(baseline, variant, top=10)
    names = [c.name for c in covered]
    assert "main (m.py)" not in names  # every other line's caller
    assert not {"lex (p.py)", "tree (p.py)"} & set(names)  # parse's callees
    assert not any(name.startswith("piece") for name in names)  # render's
    assert sum(c.difference for c in covered) == pytest.approx(45.0)
    assert covering(baseline, baseline) == ()  # nothing to explain: no line


def test_answer_line_keeps_self_times_where_they_explain_more() -> None:
    baseline = [sampled_run("base", n, 0.0) for n in range(1, 4)]
    variant = [sampled_run("slow", n, 0.05) for n in range(1, 4)]
    explanation = explain(baseline, variant)
    assert explanation is not None
    line = answer_line(explanation)
    assert "in spin (app.py);" in line and "with callees" not in line


def test_a_function_that_is_its_whole_part_is_no_line() -> None:
    # Every piece grows alike: only main() holds the whole difference, and main() is
    # all of the worker; "by part" says that already.
    baseline = [folded_run("base", n, app_lines(20.0, 100.0, 100.0)) for n in (1, 2)]
    variant = [folded_run("slow", n, app_lines(24.0, 120.0, 120.0)) for n in (1, 2)]
    names = [c.name for c in covering(baseline, variant)]
    assert names and "main (m.py)" not in names
    assert "main (m.py)" in [c.name for c in covering(baseline, variant, whole=1.01)]


@pytest.mark.parametrize("kind", ["compute", "syscalls", "crowded"])
def test_the_planted_function_of_each_kind_comes_out_at_its_size(kind: str) -> None:
    """f() costs 300 µs/request more in the variant; its sending grows a little too (the
    waits py-spy counts as running land there: respond() +10 … +30)."""
    baseline = [planted_run("base", n, kind, 0.0) for n in range(1, 5)]
    variant = [
        planted_run("slow", n, kind, 300.0 + e, noise=w)
        for n, (e, w) in enumerate([(-6.0, 10.0), (3.0, 30.0), (5.0, 20.0), (-2.0, 25.0)], 1)
    ]
    explanation = explain(baseline, variant)
    assert explanation is not None
    top = explanation.functions[0]
    assert top.name == PLANTED
    assert top.comparison.interval is not None
    low, high = top.comparison.interval
    assert low < 300.0 < high
    # The inclusive view names f(), not handle_request(), which holds f() and respond().
    assert explanation.inclusive[0].name == PLANTED
    assert f"app workers {KERNEL}" not in [c.name for c in explanation.functions]


def _routed(spin: float, sibling: float) -> dict[str, float]:
    """A router calling the planted spin() and a sibling serialise(), under a worker's
    main() that also idles."""
    return {
        "main (m.py:1);route (r.py:3);spin (app.py:20)": spin,
        "main (m.py:1);route (r.py:3);serialise (r.py:8)": 200.0 + sibling,
        "main (m.py:1);idle (m.py:7)": 300.0,
    }


@pytest.mark.parametrize(("sibling", "named"), [
    # The sibling's growth is noise (+30 and -10 … +30): route() explains more than
    # spin() by an amount the starts cannot tell from 0, so the line is spin()'s.
    ([30.0, -10.0, 30.0, -10.0, 25.0], "spin (app.py)"),
    # It grows by 30 in every start: route() carries a change of its own beyond spin(),
    # and its line says so.
    ([30.0, 29.0, 31.0, 30.0, 30.0], "route (r.py)"),
])
def test_the_inclusive_view_names_the_callee_unless_its_caller_changed_beyond_it(
    sibling: list[float], named: str
) -> None:
    spins = [50.0, 52.0, 48.0, 51.0, 49.0]
    baseline = [folded_run("base", n, _routed(0.0, 0.0)) for n in range(1, 6)]
    variant = [
        folded_run("slow", n, _routed(spin, extra))
        for n, spin, extra in zip(range(1, 6), spins, sibling, strict=True)
    ]
    [first, *_] = covering(baseline, variant)
    assert first.name == named
    if named == "spin (app.py)":  # the sibling's noise is left to the later lines
        assert first.difference == pytest.approx(50.0)
