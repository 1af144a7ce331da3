"""Where the CPU went, per request: folded stacks turned into CPU µs per request by part
of the stack and by function, and compared with the baseline over starts. Pure.

A run's samples are only proportions: each part's samples (``app master``, ``app
workers``) are scaled to the CPU seconds that part was measured to use in the window
(``ProcessUsage``, as every run records them), then divided by the run's requests. A
part with CPU and no samples (a front, which is not Python) keeps its CPU as one frame of
its own, so a run's stacks add up to its stack CPU per request. Samples of threads
blocked on a lock or queue (``WAITING``) are left out first. A function's figure is
its self time (the stacks where it is the innermost frame), so functions add up too.
Against the baseline, each part and function is compared over starts as the answer's
metric is (paired by round when both were measured in the same rounds: see
``analysis.analyze.compare_round_values``); the total's difference less the lines shown
is "unexplained".
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from servelab.analysis.analyze import compare_round_values
from servelab.analysis.stats import Comparison
from servelab.results.records import ProcessUsage, RunRecord

Stack = tuple[str, ...]
# Innermost frames of a thread blocked on a lock or a queue. py-spy, pausing the process,
# counts such a thread as busy (it waits in a futex, as a thread waiting for the GIL does;
# a sleep or a select it counts as idle): 80 % of the samples of the seed app's sync
# endpoints were its idle thread pool in Condition.wait. Those samples are left out.
WAITING = frozenset({
    "Condition.wait (threading.py)",
    "Semaphore.acquire (threading.py)",
    "Thread._wait_for_tstate_lock (threading.py)",
    "_worker (concurrent/futures/thread.py)",  # its leaf only while it waits for work
})
NOT_PROFILED = "(not profiled: not Python)"
NOT_SAMPLED = "(no samples)"
_LINE_NUMBER = re.compile(r" \(([^()]*?):\d+\)$")


def parse_folded(text: str) -> dict[Stack, float]:
    """``a;b;c 12`` lines as {("a", "b", "c"): 12}; lines that are not folded stacks are
    skipped, the same stack twice is added up."""
    stacks: dict[Stack, float] = defaultdict(float)
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        try:
            value = float(count)
        except ValueError:
            continue
        if stack:
            stacks[tuple(stack.split(";"))] += value
    return dict(stacks)


def frame_function(frame: str) -> str:
    """A frame without its line number: ``handle (app.py:12)`` -> ``handle (app.py)``."""
    return _LINE_NUMBER.sub(r" (\1)", frame)


def part_cpu_s(processes: Sequence[ProcessUsage], masters: Sequence[int]) -> dict[str, float]:
    """CPU seconds of each part of the stack: a role with one process is itself ("nginx",
    "app"); with more, its first process (a pid in ``masters``, or none) is "<role>
    master" and the rest "<role> workers"."""
    by_role: dict[str, list[ProcessUsage]] = defaultdict(list)
    for process in processes:
        by_role[process.role].append(process)
    parts: dict[str, float] = defaultdict(float)
    for role, members in by_role.items():
        if len(members) == 1:
            parts[role] += members[0].cpu_s
            continue
        for process in members:
            kind = "master" if process.pid in masters else "workers"
            parts[f"{role} {kind}"] += process.cpu_s
    return dict(parts)


@dataclass(frozen=True)
class RunProfile:
    """One run's CPU per request (µs), by part of the stack and by stack."""

    variant: str
    workload: str
    repetition: int
    requests: int
    parts: Mapping[str, float]
    stacks: Mapping[Stack, float]  # first frame: the part

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def functions(self) -> dict[str, float]:
        """Self time by function (its innermost frames), line numbers left out."""
        found: dict[str, float] = defaultdict(float)
        for stack, value in self.stacks.items():
            leaf = stack[-1] if len(stack) > 1 else NOT_SAMPLED
            name = f"{stack[0]} {leaf}" if leaf in (NOT_PROFILED, NOT_SAMPLED) else leaf
            found[frame_function(name)] += value
        return dict(found)


def run_profile(run: RunRecord, folded: str) -> RunProfile:
    """``run``'s folded stacks (as ``results.profiles`` stores them) per request."""
    masters = run.profile.masters if run.profile is not None else ()
    cpu = part_cpu_s(run.processes, masters)
    samples = parse_folded(folded)
    requests = max(run.load.requests_total, 1)
    # The sampled stacks name "app master"/"app workers"; a role of one process is "app".
    single = {part for part in cpu if " " not in part}
    by_part: dict[str, float] = defaultdict(float)
    relabelled: dict[Stack, float] = defaultdict(float)
    for stack, count in samples.items():
        if len(stack) > 1 and frame_function(stack[-1]) in WAITING:
            continue  # a thread waiting on a lock, which py-spy counts as busy
        role = stack[0].split(" ")[0]
        part = role if role in single else stack[0]
        relabelled[(part, *stack[1:])] += count
        by_part[part] += count
    stacks: dict[Stack, float] = {}
    for part, seconds in cpu.items():
        us = 1e6 * seconds / requests
        total = by_part.get(part, 0.0)
        if total <= 0:
            if us > 0:
                role = part.split(" ")[0]
                sampled = any(p.split(" ")[0] == role for p in by_part)
                stacks[(part, NOT_SAMPLED if sampled else NOT_PROFILED)] = us
            continue
        for stack, count in relabelled.items():
            if stack[0] == part:
                stacks[stack] = us * count / total
    parts = {part: 1e6 * seconds / requests for part, seconds in cpu.items()}
    return RunProfile(run.variant, run.workload, run.repetition, requests, parts, stacks)


def run_profiles(
    runs: Sequence[RunRecord], folded: Mapping[tuple[str, str, int], str]
) -> list[RunProfile]:
    """Every run with folded stacks in ``folded`` ((variant, workload, repetition) ->
    text: ``results.profiles.read_profiles``), per request."""
    return [
        run_profile(run, folded[key])
        for run in runs
        if (key := (run.variant, run.workload, run.repetition)) in folded
    ]


def mean_stacks(profiles: Sequence[RunProfile]) -> dict[Stack, float]:
    """The stacks' CPU per request, averaged over starts (a flame graph's widths)."""
    total: dict[Stack, float] = defaultdict(float)
    for profile in profiles:
        for stack, value in profile.stacks.items():
            total[stack] += value / len(profiles)
    return dict(total)


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
    return Explanation(
        workload=variant[0].workload,
        variant=variant[0].variant,
        baseline=baseline[0].variant,
        starts=(len(baseline), len(variant)),
        total=total,
        parts=tuple(largest(parts)),
        functions=shown,
        unexplained=total.difference - sum(c.difference for c in shown),
    )


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
    return lines


def answer_line(explanation: Explanation, *, top: int = 2) -> str:
    """One line under the answer: the stack's CPU per request change and the ``top``
    functions behind it, with what they leave unexplained."""
    shown = explanation.functions[:top]
    rest = explanation.total.difference - sum(c.difference for c in shown)
    named = "; ".join(f"{c.difference:+.1f} in {c.name}" for c in shown)
    return (
        f"why {explanation.variant} ({explanation.workload}): stack CPU "
        f"{_short(explanation.total)} µs/request: {named}; {rest:+.1f} unexplained"
    )
