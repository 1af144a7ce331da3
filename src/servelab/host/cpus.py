"""CPU sets for the stack and the load driver, so they do not fight for cores."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import psutil

from servelab.errors import SpecError


def parse_cpu_list(text: str) -> frozenset[int]:
    """'0-2,5' -> {0, 1, 2, 5}, as taskset --cpu-list reads it."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                if low > high:
                    raise ValueError(part)
                cpus.update(range(low, high + 1))
            else:
                cpus.add(int(part))
    except ValueError:
        raise SpecError(
            f"invalid CPU list {text!r}", "write CPUs as taskset does, e.g. '0' or '0-2,5'"
        ) from None
    return frozenset(cpus)


def count_cpus(cpus: str | None) -> int:
    """How many CPUs a CPU list names ("0-2,5": 4); None (not pinned): the machine's."""
    return len(parse_cpu_list(cpus)) if cpus else os.cpu_count() or 1


def format_cpu_list(cpus: frozenset[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


@contextlib.contextmanager
def moved_to(roots: Iterable[int], cpus: str) -> Iterator[list[int]]:
    """Each process of ``roots`` and all it has forked runs on ``cpus`` (a taskset list)
    until the block ends, then on the CPUs it had before; yields the pids moved. A
    process gone meanwhile is left out (one that ends is no longer anyone's to move)."""
    moved: dict[int, set[int]] = {}
    to = parse_cpu_list(cpus)
    try:
        for root in roots:
            with contextlib.suppress(psutil.Error):
                tree = psutil.Process(root)
                for process in (tree, *tree.children(recursive=True)):
                    # OSError: gone (ESRCH), or pinned by the kernel (EINVAL: a
                    # per-CPU kernel thread), either way not ours to move.
                    with contextlib.suppress(OSError, psutil.Error):
                        before = os.sched_getaffinity(process.pid)
                        os.sched_setaffinity(process.pid, to)
                        moved[process.pid] = before
        yield list(moved)
    finally:
        for pid, before in moved.items():
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(pid, before)


@dataclass(frozen=True)
class CpuPlan:
    """Which CPUs the stack and the driver may use; None means 'not pinned'."""

    stack: str | None
    driver: str | None
    stack_quota: float | None = None  # CPUs of time the stack may use (cgroup), like --cpus
    # Favour the stack and the driver over other processes with a cgroup CPU weight.
    cpu_priority: bool = True

    @property
    def pinned(self) -> bool:
        return self.stack is not None and self.driver is not None

    @property
    def shared(self) -> bool:
        """True when stack and driver may run on the same CPU."""
        if not self.pinned:
            return True
        return bool(parse_cpu_list(self.stack) & parse_cpu_list(self.driver))  # type: ignore[arg-type]

    @property
    def stack_capacity(self) -> float:
        """CPUs of time the stack may use: its quota, else its CPUs, else the machine's."""
        if self.stack_quota:
            return self.stack_quota
        if self.stack is not None:
            return float(len(parse_cpu_list(self.stack)))
        return float(os.cpu_count() or 1)

    def describe(self) -> str:
        quota = f"; stack capped at {self.stack_quota:g} CPUs of time" if self.stack_quota else ""
        quota += (
            "; stack and driver favoured over other processes (cgroup CPU weight)"
            if self.cpu_priority
            else "; no CPU priority over other processes"
        )
        if not self.pinned:
            return f"not pinned: the stack and the load driver share all CPUs{quota}"
        return f"stack on CPU {self.stack}, load driver on CPU {self.driver}{quota}"


def default_cpu_plan(available: frozenset[int] | None = None) -> CpuPlan:
    """Split the CPUs this process may use: the driver gets a quarter (at least one)."""
    cpus = sorted(available if available is not None else os.sched_getaffinity(0))
    if len(cpus) < 2:
        return CpuPlan(stack=None, driver=None)
    n_driver = max(1, len(cpus) // 4)
    return CpuPlan(
        stack=format_cpu_list(frozenset(cpus[:-n_driver])),
        driver=format_cpu_list(frozenset(cpus[-n_driver:])),
    )


def make_cpu_plan(
    stack: str | None,
    driver: str | None,
    pin: bool = True,
    quota: float | None = None,
    priority: bool = True,
) -> CpuPlan:
    """Validate user-chosen CPU sets against the CPUs this process may use."""
    return replace(_cpu_sets(stack, driver, pin, quota), cpu_priority=priority)


def _cpu_sets(stack: str | None, driver: str | None, pin: bool, quota: float | None) -> CpuPlan:
    if quota is not None and quota <= 0:
        raise SpecError(
            f"--stack-cpu-quota must be positive, got {quota:g}", "pass CPUs of time, e.g. 1.5"
        )
    if not pin:
        return CpuPlan(stack=None, driver=None, stack_quota=quota)
    if stack is None and driver is None:
        return replace(default_cpu_plan(), stack_quota=quota)
    if stack is None or driver is None:
        raise SpecError(
            "only one of --stack-cpus / --driver-cpus was given", "give both, or neither"
        )
    available = os.sched_getaffinity(0)
    for label, text in (("stack", stack), ("driver", driver)):
        missing = parse_cpu_list(text) - available
        if missing:
            raise SpecError(
                f"{label} CPUs {format_cpu_list(frozenset(missing))} are not available here",
                f"choose among CPUs {format_cpu_list(frozenset(available))}",
            )
    return CpuPlan(
        stack=format_cpu_list(parse_cpu_list(stack)),
        driver=format_cpu_list(parse_cpu_list(driver)),
        stack_quota=quota,
    )


@dataclass(frozen=True)
class SideBySidePlan:
    """Where each of the stacks measured at the same moments runs, and its load driver:
    a CPU set of its own each where the machine has enough CPUs (duet benchmarking
    proper: simultaneous, not sharing), else one set they all share."""

    stacks: tuple[str, ...]  # one CPU list per stack slot
    drivers: tuple[str, ...]  # one CPU list per stack slot's driver
    stack_size: int  # CPUs a stack was meant to have (sized like the deployment)

    @property
    def own_stack_cpus(self) -> bool:
        return len({*self.stacks}) == len(self.stacks) and len(self.stacks) > 1

    @property
    def own_driver_cpus(self) -> bool:
        return len({*self.drivers}) == len(self.drivers) and len(self.drivers) > 1

    def describe(self) -> str:
        n = len(self.stacks)
        if self.own_stack_cpus:
            stacks = (
                f"{n} stacks side by side, each on CPUs of its own "
                f"({', '.join(self.stacks)}; they share only the memory bus and caches)"
            )
        else:
            stacks = (
                f"{n} stacks side by side sharing CPU {self.stacks[0]} (fewer than "
                f"{n} x {self.stack_size} stack CPUs): each stack's requests/s is its share; "
                "requests per CPU second carries the answer"
            )
        drivers = (
            f"a driver each on CPU {', '.join(self.drivers)}" if self.own_driver_cpus
            else f"their drivers sharing CPU {self.drivers[0]}"
        )
        return f"{stacks}; {drivers}"


def plan_side_by_side(plan: CpuPlan, stacks: int, stack_size: int = 1) -> SideBySidePlan:
    """Split ``plan``'s stack CPUs into ``stacks`` sets of ``stack_size`` CPUs where they
    fit (else every stack gets the whole stack set), and its driver CPUs into one set per
    stack where there is at least one CPU each (else they share). Pure: the same plan for
    the same CPUs, so it can be tested on any topology."""
    if stacks < 1 or stack_size < 1:
        raise ValueError("a side-by-side plan needs at least one stack of one CPU")
    if plan.stack is None or plan.driver is None:  # not pinned: nothing to split
        return SideBySidePlan(("all",) * stacks, ("all",) * stacks, stack_size)
    stack_cpus = sorted(parse_cpu_list(plan.stack))
    driver_cpus = sorted(parse_cpu_list(plan.driver))
    if len(stack_cpus) >= stacks * stack_size:
        stack_sets = tuple(
            format_cpu_list(frozenset(stack_cpus[i * stack_size:(i + 1) * stack_size]))
            for i in range(stacks)
        )
    else:
        stack_sets = (plan.stack,) * stacks
    each = len(driver_cpus) // stacks
    if stacks > 1 and each >= 1:
        driver_sets = tuple(
            format_cpu_list(frozenset(driver_cpus[i * each:(i + 1) * each]))
            for i in range(stacks)
        )
    else:
        driver_sets = (plan.driver,) * stacks
    return SideBySidePlan(stack_sets, driver_sets, stack_size)
