"""Why a variant's CPU per request differs from the baseline's, on one workload: the
total, each part of the stack and the functions, compared over starts from the runs'
profiles (``servelab.analysis.profile``), and the lines that say so. Pure.

Each part and function is compared over starts as the answer's metric is (paired by
round when both were measured in the same rounds: see
``analysis.comparisons.compare_round_values``); the total's difference less the lines shown
is "unexplained". A function's figure is its self time; the inclusive view (``covering``)
names functions with their callees instead, picked so that no stack counts twice.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from servelab.analysis.comparisons import compare_round_values
from servelab.analysis.profile import (
    SYNTHETIC,
    RunProfile,
    Stack,
    frame_function,
    is_synthetic,
    leaf_name,
)
from servelab.analysis.stats import Comparison

# Sampled seconds per CPU second past which an explanation says that its function figures
# count time spent waiting for a CPU (py-spy counts a runnable thread as busy).
WAITED = 1.25


@dataclass(frozen=True)
class Change:
    """One part's or function's CPU per request, variant against baseline (µs)."""

    name: str
    comparison: Comparison

    @property
    def difference(self) -> float:
        return self.comparison.difference


@dataclass(frozen=True)
class Explanation:
    """Why a variant's CPU per request differs from the baseline's, on one workload."""

    workload: str
    variant: str
    baseline: str
    starts: tuple[int, int]  # profiled starts (baseline, variant)
    total: Change  # the stack's CPU per request
    parts: tuple[Change, ...]  # largest difference first
    functions: tuple[Change, ...]  # the largest differences, largest first
    unexplained: float  # the total's difference less the functions shown (µs/request)
    # The inclusive view: functions with their callees, no stack counted twice
    # (``covering``), and what they leave; sampled seconds per CPU second (``waited``).
    inclusive: tuple[Change, ...] = ()
    inclusive_unexplained: float = 0.0
    waited: float | None = None
    profiled_at: int | None = None  # a crowded stack's profiling concurrency (RunProfile)


def _change(
    name: str, baseline: Mapping[int, float], variant: Mapping[int, float]
) -> Change:
    return Change(name, compare_round_values(baseline, variant, higher_is_better=False))


def _by_start(
    profiles: Sequence[RunProfile], figures: Sequence[Mapping[str, float]], name: str
) -> dict[int, float]:
    return {p.repetition: f.get(name, 0.0) for p, f in zip(profiles, figures, strict=True)}


def explain(
    baseline: Sequence[RunProfile], variant: Sequence[RunProfile], *, top: int = 5
) -> Explanation | None:
    """The variant's CPU per request against the baseline's: the total, each part, and the
    ``top`` functions whose self time changed most; None without profiles on both sides."""
    if not baseline or not variant:
        return None
    totals = [{"total": p.total} for p in (*baseline, *variant)]
    total = _change(
        "stack CPU per request",
        _by_start(baseline, totals[: len(baseline)], "total"),
        _by_start(variant, totals[len(baseline):], "total"),
    )
    part_names = sorted({n for p in (*baseline, *variant) for n in p.parts})
    parts = [
        _change(
            name,
            _by_start(baseline, [p.parts for p in baseline], name),
            _by_start(variant, [p.parts for p in variant], name),
        )
        for name in part_names
    ]
    b_functions = [p.functions() for p in baseline]
    v_functions = [p.functions() for p in variant]
    names = sorted({n for f in (*b_functions, *v_functions) for n in f})
    functions = [
        _change(
            name, _by_start(baseline, b_functions, name), _by_start(variant, v_functions, name)
        )
        for name in names
    ]

    def largest(changes: list[Change]) -> list[Change]:
        return sorted(changes, key=lambda c: (-abs(c.difference), c.name))

    shown = tuple(largest(functions)[:top])
    covered = covering(baseline, variant, top=top)
    ratios = [r for p in (*baseline, *variant) if (r := p.waited()) is not None]
    return Explanation(
        workload=variant[0].workload,
        variant=variant[0].variant,
        baseline=baseline[0].variant,
        starts=(len(baseline), len(variant)),
        total=total,
        parts=tuple(largest(parts)),
        functions=shown,
        unexplained=total.difference - sum(c.difference for c in shown),
        inclusive=covered,
        inclusive_unexplained=total.difference - sum(c.difference for c in covered),
        waited=sum(ratios) / len(ratios) if ratios else None,
        profiled_at=max(
            (p.concurrency for p in (*baseline, *variant) if p.concurrency), default=None
        ),
    )


@functools.lru_cache(maxsize=1 << 16)
def _names_on(stack: Stack) -> frozenset[str]:
    """The functions a stack's CPU counts for inclusively: each frame once (recursion is
    not counted twice), a part's synthetic frame by ``leaf_name``; not the part itself."""
    names = {frame_function(frame) for frame in stack[1:] if frame not in SYNTHETIC}
    if len(stack) == 1 or stack[-1] in SYNTHETIC:
        names.add(leaf_name(stack))
    return frozenset(names)


def inclusive(stacks: Mapping[Stack, float]) -> dict[str, float]:
    """Each function's CPU with its callees' (every stack it is on), line numbers left
    out; the part frames themselves are not functions."""
    found: dict[str, float] = defaultdict(float)
    for stack, value in stacks.items():
        for name in _names_on(stack):
            found[name] += value
    return dict(found)


def _depths(stacks: Mapping[Stack, float]) -> dict[str, int]:
    """How deep each function sits at most (its first frame on a stack; 1: a root)."""
    found: dict[str, int] = {}
    for stack in stacks:
        for depth, frame in enumerate(stack[1:], 1):
            name = leaf_name((stack[0], frame))
            found[name] = max(found.get(name, 0), depth)
    return found


def covering(
    baseline: Sequence[RunProfile],
    variant: Sequence[RunProfile],
    *,
    top: int = 5,
    specific: float = 0.8,
    whole: float = 0.9,
) -> tuple[Change, ...]:
    """Up to ``top`` functions that, each with its callees, explain most of the variant's
    difference, no stack counted twice. In turn: the function whose inclusive difference
    leaves the least of the difference unexplained; among those that explain at least
    ``specific`` as much, the most specific one (the least inclusive CPU, then the
    deepest: a callee that carries the difference rather than its callers); then every
    stack it is on is set aside, so that no later line is its caller's or callee's share
    again. Stops when no function explains more. Opposite-sign self times under one caller
    net out in it, which the self-time view's lines cannot do. A function that is nearly
    all of its part (``whole`` of its CPU or more: the event loop, a worker's main) is not
    a line: "by part" already says that much."""
    left_b = [dict(p.stacks) for p in baseline]
    left_v = [dict(p.stacks) for p in variant]
    chosen: list[Change] = []

    def mean(found: Sequence[Mapping[str, float]], name: str) -> float:
        return sum(f.get(name, 0.0) for f in found) / len(found)

    everything = [*left_b, *left_v]
    part_cpu = {  # its sampled CPU (not its kernel time, nor an unsampled remainder)
        part: sum(
            v for stacks in everything for s, v in stacks.items()
            if s[0] == part and not is_synthetic(leaf_name(s))
        )
        for part in {s[0] for stacks in everything for s in stacks}
    }
    in_parts: dict[str, float] = defaultdict(float)  # a function's CPU, all its parts'
    for part, cpu in part_cpu.items():
        for name in {n for stacks in everything for s in stacks if s[0] == part
                     for n in _names_on(s)}:
            in_parts[name] += cpu
    all_inclusive: dict[str, float] = defaultdict(float)
    for stacks in everything:
        for name, value in inclusive(stacks).items():
            all_inclusive[name] += value
    too_whole = {
        name for name, value in all_inclusive.items()
        if not is_synthetic(name) and value >= whole * in_parts[name]
    }

    for _ in range(top):
        b_inc = [inclusive(s) for s in left_b]
        v_inc = [inclusive(s) for s in left_v]
        rest = (
            sum(sum(s.values()) for s in left_v) / len(left_v)
            - sum(sum(s.values()) for s in left_b) / len(left_b)
        )
        gains = {
            name: abs(rest) - abs(rest - (mean(v_inc, name) - mean(b_inc, name)))
            for name in {n for found in (*b_inc, *v_inc) for n in found} - too_whole
        }
        best = max(gains.values(), default=0.0)
        if best <= 0:
            break
        depths = _depths({s: 0.0 for found in (*left_b, *left_v) for s in found})
        leader = max(gains, key=lambda n: (gains[n], n))
        good = {name for name, gain in gains.items() if gain >= specific * best}
        good |= _callees_that_carry_it(
            leader, [n for n, gain in gains.items() if gain > 0], baseline, variant,
            (b_inc, v_inc), [*left_b, *left_v],
        )
        pick = min(
            good, key=lambda n: (mean(b_inc, n) + mean(v_inc, n), -depths.get(n, 0), n),
        )
        chosen.append(_change(
            pick, _by_start(baseline, b_inc, pick), _by_start(variant, v_inc, pick)
        ))
        left_b = [{s: v for s, v in f.items() if pick not in _names_on(s)} for f in left_b]
        left_v = [{s: v for s, v in f.items() if pick not in _names_on(s)} for f in left_v]
    return tuple(chosen)


def _besides(
    profiles: Sequence[RunProfile], figures: Sequence[Mapping[str, float]], caller: str,
    callee: str,
) -> dict[int, float]:
    """What ``caller`` costs besides ``callee``, per start."""
    return {
        p.repetition: f.get(caller, 0.0) - f.get(callee, 0.0)
        for p, f in zip(profiles, figures, strict=True)
    }


def _callees_that_carry_it(
    leader: str,
    names: Sequence[str],
    baseline: Sequence[RunProfile],
    variant: Sequence[RunProfile],
    figures: tuple[Sequence[Mapping[str, float]], Sequence[Mapping[str, float]]],
    stacks: Sequence[Mapping[Stack, float]],
) -> set[str]:
    """The callees of ``leader`` (every stack they are on is one of its) that carry its
    difference: their own changed beyond the noise, the same way, and what ``leader``
    does besides them did not (its 95 % interval holds 0). On a crowded stack every
    function grows a little with a planted one; the caller then explains more than the
    planted function, by an amount the starts cannot tell from noise (issue 37: the
    inclusive view named FastAPI's routing function in 7 of 10 runs)."""
    b_inc, v_inc = figures
    lead = _change(leader, _by_start(baseline, b_inc, leader), _by_start(variant, v_inc, leader))
    if lead.comparison.interval is None:
        return set()
    sign = 1.0 if lead.difference > 0 else -1.0
    found = set()
    for name in names:
        if name == leader:
            continue
        own = _change(name, _by_start(baseline, b_inc, name), _by_start(variant, v_inc, name))
        interval = own.comparison.interval
        if interval is None or min(sign * interval[0], sign * interval[1]) <= 0:
            continue  # not changed beyond the noise, or the other way
        besides = _change(
            leader, _besides(baseline, b_inc, leader, name), _besides(variant, v_inc, leader, name)
        ).comparison.interval
        if besides is None or not besides[0] <= 0 <= besides[1]:
            continue
        if all(leader in _names_on(s) for f in stacks for s in f if name in _names_on(s)):
            found.add(name)
    return found


def explain_all(
    profiles: Sequence[RunProfile], baseline: str, *, top: int = 5
) -> list[Explanation]:
    """Every variant against ``baseline``, per workload, in the order they were measured."""
    groups: dict[tuple[str, str], list[RunProfile]] = defaultdict(list)
    for profile in profiles:
        groups[(profile.workload, profile.variant)].append(profile)
    found = []
    for (workload, variant), mine in groups.items():
        if variant == baseline:
            continue
        explanation = explain(groups.get((workload, baseline), []), mine, top=top)
        if explanation is not None:
            found.append(explanation)
    return found


def change_line(change: Change, unit: str = "µs/request") -> str:
    """``+52.1 µs/request (95 % +48.0 to +56.3) in extra_work (seed_fastapi.py)``."""
    interval = change.comparison.interval
    within = (
        f" (95 % {interval[0]:+.1f} to {interval[1]:+.1f})" if interval is not None
        else f" ({change.comparison.reason})"
    )
    return f"{change.difference:+.1f} {unit}{within} in {change.name}"


def _short(change: Change) -> str:
    interval = change.comparison.interval
    if interval is None:
        return f"{change.difference:+.1f} ({change.comparison.reason})"
    return f"{change.difference:+.1f} (95 % {interval[0]:+.1f} to {interval[1]:+.1f})"


def why_lines(explanation: Explanation) -> list[str]:
    """What an explanation says, in a few lines: the total, the functions, the rest."""
    total = explanation.total.comparison
    lines = [
        f"{explanation.variant} vs {explanation.baseline} ({explanation.workload}): stack CPU "
        f"{total.variant_mean:.1f} vs {total.baseline_mean:.1f} µs/request, "
        + change_line(explanation.total).replace(" in stack CPU per request", "")
        + f"; {explanation.starts[1]} vs {explanation.starts[0]} profiled starts"
    ]
    lines.append("  by part: " + "; ".join(
        f"{c.name} {c.comparison.variant_mean:.1f} µs/request, {_short(c)}"
        for c in explanation.parts
    ))
    lines += [f"  {change_line(change)}" for change in explanation.functions]
    lines.append(f"  {explanation.unexplained:+.1f} µs/request unexplained (the rest)")
    if explanation.inclusive:
        lines.append("  functions with their callees (no stack counted twice):")
        lines += [f"    {change_line(change)}" for change in explanation.inclusive]
        lines.append(
            f"    {explanation.inclusive_unexplained:+.1f} µs/request unexplained (the rest)"
        )
    if explanation.profiled_at is not None:
        n = explanation.profiled_at
        lines.append(
            f"  note: profiled at {n} connection{'s' if n > 1 else ''}, as many as the "
            "stack's CPUs (more of its app's threads than CPUs were busy at the measured "
            "load, and py-spy counts a thread waiting for a CPU as running): the figures "
            "are per request at that load"
        )
    if explanation.waited is not None and explanation.waited >= WAITED:
        lines.append(
            f"  note: py-spy's samples came to {explanation.waited:.1f} s per CPU second of "
            "the sampled processes: their threads waited for a CPU, and py-spy counts a "
            "thread waiting for a CPU as busy, so a function's share counts its waits too "
            "(long-running functions gain; the parts' and kernel figures are measured)"
        )
    return lines


def answer_line(explanation: Explanation, *, top: int = 2) -> str:
    """One line under the answer: the stack's CPU per request change and the ``top``
    functions behind it, with what they leave unexplained: self times, or functions with
    their callees (``covering``) where those leave less unexplained."""
    total = explanation.total.difference
    shown = explanation.functions[:top]
    rest = total - sum(c.difference for c in shown)
    callees = False
    covered = explanation.inclusive[:top]
    if covered and abs(total - sum(c.difference for c in covered)) < abs(rest):
        shown, callees = covered, True
        rest = total - sum(c.difference for c in shown)
    named = "; ".join(
        f"{c.difference:+.1f} in {c.name}"
        + (" with callees" if callees and not is_synthetic(c.name) else "")
        for c in shown
    )
    return (
        f"why {explanation.variant} ({explanation.workload}): stack CPU "
        f"{_short(explanation.total)} µs/request: {named}; {rest:+.1f} unexplained"
    )
