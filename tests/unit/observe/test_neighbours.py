"""Other processes' share of the stack's CPUs, from /proc/stat counters."""

import os

import pytest
from support import PORT_VS_SOCKET as EXPERIMENT
from support import seed_run as run

from servelab.analysis.analyze import analyze
from servelab.analysis.warnings import WarningKind
from servelab.observe.neighbours import CpuTimes, cpu_speed, neighbour_share, read_cpu_times

TICK = os.sysconf("SC_CLK_TCK")
STAT = """cpu  900 0 300 5000 10 0 20 0 0 0
cpu0 500 0 200 2000 5 0 10 30 0 0
cpu1 400 0 100 3000 5 0 10 0 0 0
intr 12345
"""


def test_reads_only_the_given_cpus_and_leaves_irq_time_out_of_tasks():
    times = read_cpu_times([0], STAT)
    assert times.tasks_s == pytest.approx(700 / TICK)  # user + nice + system
    assert times.steal_s == pytest.approx(30 / TICK)
    assert times.total_s == pytest.approx(2745 / TICK)
    both = read_cpu_times([0, 1], STAT)
    assert both.tasks_s == pytest.approx(1200 / TICK)


def test_share_is_what_the_stack_did_not_use_plus_steal():
    before = CpuTimes(tasks_s=10.0, steal_s=1.0, total_s=100.0)
    after = CpuTimes(tasks_s=19.0, steal_s=1.5, total_s=110.0)
    # 9 s of task time on the CPUs in 10 s; the stack used 8 -> 1 s others + 0.5 s steal.
    assert neighbour_share(before, after, stack_cpu_s=8.0) == pytest.approx(0.15)
    # The stack's own sampling may read a little more than the CPU counters: never < 0.
    assert neighbour_share(before, after, stack_cpu_s=9.5) == pytest.approx(0.05)
    assert neighbour_share(before, before, stack_cpu_s=0.0) is None


def with_share(result, share):
    return result.model_copy(update={"neighbour_cpu_share": share})


def test_a_run_with_busy_neighbours_is_flagged():
    quiet = [with_share(run("tcp", rep, 1000.0, 50.0), 0.01) for rep in (1, 2, 3)]
    kinds = {w.kind for w in analyze(EXPERIMENT, quiet).all_warnings}
    assert WarningKind.NEIGHBOURS not in kinds
    noisy = [*quiet[:2], with_share(run("tcp", 3, 700.0, 70.0), 0.30)]
    warnings = [
        w for w in analyze(EXPERIMENT, noisy).all_warnings if w.kind is WarningKind.NEIGHBOURS
    ]
    assert len(warnings) == 1
    assert "30 %" in warnings[0].message and "run 3" in warnings[0].message


def test_doctor_says_whether_cpu_priority_is_available(monkeypatch):
    from servelab.host import cgroups
    from servelab.host.doctor import cpu_priority_check

    monkeypatch.setattr(cgroups, "quota_unavailable_reason", lambda: None)
    assert cpu_priority_check().status == "ok"
    monkeypatch.setattr(
        cgroups, "quota_unavailable_reason", lambda: "/sys/fs/cgroup/cpu is not writable"
    )
    check = cpu_priority_check()
    assert check.status == "warn" and "not writable" in check.found and "root" in check.fix


def with_speed(result, speed):
    return result.model_copy(update={"cpu_speed": speed})


def test_a_drifting_machine_is_flagged_and_a_steady_one_is_not():
    steady = [
        with_speed(run("tcp", rep, 1000.0, 50.0), s) for rep, s in ((1, 100), (2, 101), (3, 99))
    ]
    kinds = {w.kind for w in analyze(EXPERIMENT, steady).all_warnings}
    assert WarningKind.MACHINE_SPEED not in kinds
    drifting = [*steady[:2], with_speed(run("tcp", 3, 800.0, 60.0), 80.0)]
    (warning,) = [
        w for w in analyze(EXPERIMENT, drifting).all_warnings if w.kind is WarningKind.MACHINE_SPEED
    ]
    assert "26 % faster at best than at worst" in warning.message  # 101 / 80


def test_the_speed_probe_runs_on_the_stack_cpu_and_gives_the_affinity_back():
    before = os.sched_getaffinity(0)
    cpu = str(min(before))
    speed = cpu_speed(cpu, seconds=0.05)
    assert speed is not None and speed > 0
    assert os.sched_getaffinity(0) == before
    assert cpu_speed(None) is None  # not pinned: no CPU of its own to probe
