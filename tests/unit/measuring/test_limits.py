"""What the machine can hold, with fake machine facts: each limit refuses with its
numbers and its fix; the ready-made studies fit a modest machine."""

from pathlib import Path

import pytest

from servelab.config.experiment import Experiment
from servelab.errors import SpecError
from servelab.measuring.limits import (
    FD_RESERVE,
    MAX_THREADS_PER_WORKER,
    MAX_WORKERS_PER_CPU,
    MachineFacts,
    check_fits_machine,
    machine_facts,
    machine_problems,
    stacks_alive_at_once,
)
from servelab.measuring.plan import launch_blocks, live_limit, plan_launches, rounds_alive_at_once
from servelab.studies import StudyOptions, all_studies, get_study

# A modest machine: 4 GiB available, the common open-files default, 2 CPUs.
MODEST = MachineFacts(available_mib=4096.0, open_files=1024, cpus=2)
BIG = MachineFacts(available_mib=64 * 1024.0, open_files=1 << 20, cpus=64)


def experiment(*, workers=2, threads=1, concurrency=10, stacks=1, **extra) -> Experiment:
    server = {"kind": "gunicorn", "worker_class": "gthread", "workers": workers,
              "threads": threads}
    variants = [{"name": f"v{i}", "server": server} for i in range(1, stacks)]
    return Experiment.model_validate(
        {
            "name": "x",
            "baseline": {"server": server},
            "variants": variants,
            "workloads": [{"name": "w", "load": {"concurrency": concurrency, "duration_s": 6}}],
            **extra,
        }
    )


def refusal(exp: Experiment, facts: MachineFacts = MODEST) -> str:
    with pytest.raises(SpecError) as caught:
        check_fits_machine(exp, facts)
    return caught.value.one_line()


@pytest.mark.parametrize("name", sorted(all_studies()))
def test_every_study_as_it_comes_fits_a_modest_machine(name):
    assert machine_problems(get_study(name).build(StudyOptions()), MODEST) == []


def test_a_normal_quick_study_passes():
    check_fits_machine(get_study("quick").build(StudyOptions(repetitions=1, duration_s=1)), MODEST)


def test_a_billion_workers_is_refused_with_the_numbers_and_the_override():
    line = refusal(experiment(workers=1_000_000_000), BIG)
    assert "1,000,000,000 app workers in stack 'baseline' need about 28.0 PiB" in line
    assert "(~30 MiB a worker); this machine has 64.0 GiB available" in line
    assert "fix: fewer workers or threads, or --allow-beyond-machine to try anyway" in line
    assert "\n" not in line


def test_memory_counts_the_stacks_alive_at_once():
    # 3 stacks x 40 workers fit one at a time (1.2 GiB each) but not side by side.
    facts = MachineFacts(available_mib=3000.0, open_files=1 << 20, cpus=64)
    alone = experiment(workers=40, stacks=3, slices=1)
    assert machine_problems(alone, facts) == []
    together = experiment(workers=40, stacks=3, slices=2, side_by_side=True)
    assert [len(s) for s in stacks_alive_at_once(together)] == [3]
    line = refusal(together, facts)
    assert "120 app workers in 3 stacks alive at once (side by side) need about 3.5 GiB" in line
    assert "this machine has 2.9 GiB available" in line
    assert "--slices 1 to keep one stack alive at a time" in line


def test_threads_add_to_the_memory():
    line = refusal(experiment(workers=64, threads=1000), MachineFacts(2500.0, 1 << 20, 64))
    assert "64 app workers with 64,000 threads in stack 'baseline' need about 3.8 GiB" in line


@pytest.mark.parametrize(
    ("repetitions", "stacks", "side_by_side"),
    [(3, 3, True), (3, 3, False), (10, 5, False), (2, 30, False), (1, 1, False)],
)
def test_rounds_alive_at_once_are_the_runners_blocks(repetitions, stacks, side_by_side):
    exp = experiment(stacks=stacks, repetitions=repetitions, slices=2, side_by_side=side_by_side)
    blocks = launch_blocks(plan_launches(exp), live_limit(exp))
    assert rounds_alive_at_once(exp) * stacks == max(len(b) for b in blocks)
    assert len(stacks_alive_at_once(exp)[0]) == max(len(b) for b in blocks)


def test_threads_beyond_the_bound_are_refused():
    threads = MAX_THREADS_PER_WORKER + 1
    line = refusal(experiment(workers=1, threads=threads, stacks=2), BIG)
    assert line.startswith(
        f"stack 'baseline' (and 1 more): {threads:,} threads per worker, more than 1,024"
    )
    assert "fix: at most 1,024 threads" in line
    check_fits_machine(experiment(workers=1, threads=MAX_THREADS_PER_WORKER), BIG)


def test_workers_beyond_what_the_cpus_start_are_refused():
    most = MAX_WORKERS_PER_CPU * MODEST.cpus
    check_fits_machine(experiment(workers=most), MachineFacts(1e6, 1 << 20, MODEST.cpus))
    line = refusal(experiment(workers=most + 1), MachineFacts(1e6, 1 << 20, MODEST.cpus))
    assert f"stack 'baseline': {most + 1} workers on 2 CPUs, more than {most} (32 a CPU)" in line
    assert f"fix: at most {most} workers" in line


def test_connections_beyond_the_open_files_limit_are_refused():
    # Behind a front, each connection is two files in the front: the client's and its own.
    fits = (MODEST.open_files - FD_RESERVE) // 2
    check_fits_machine(experiment(concurrency=fits), MODEST)
    line = refusal(experiment(concurrency=fits + 1), MODEST)
    assert (
        f"workload 'w': {fits + 1} connections from the driver, and as many from nginx to "
        f"the app, need about {2 * (fits + 1) + FD_RESERVE:,} open files in nginx; the open "
        "files limit is 1,024 (fix: lower the concurrency, or raise the limit first "
        "(ulimit -n 2048)"
    ) in line


def test_without_a_front_the_app_server_holds_the_connections():
    exp = Experiment.model_validate(
        {
            "name": "x",
            "baseline": {"server": {"kind": "uvicorn"}, "proxy": {"kind": "none"}},
            "workloads": [{"name": "w", "load": {"concurrency": 1500, "duration_s": 6}}],
        }
    )
    line = refusal(exp)
    assert "1,500 connections from the driver need about 1,516 open files in the app server" in line


def test_unknown_memory_and_no_open_files_limit_are_not_checked():
    exp = experiment(workers=60, concurrency=100_000)
    assert machine_problems(exp, MachineFacts(None, None, 2)) == []


def test_every_problem_is_on_the_one_line():
    line = refusal(experiment(workers=1000, concurrency=100_000), MODEST)
    assert line.count("fix:") == 3 and "\n" not in line
    assert line.endswith("or --allow-beyond-machine to try anyway)")


def test_machine_facts_reads_memavailable(tmp_path: Path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 8000000 kB\nMemAvailable: 2097152 kB\n")
    facts = machine_facts(meminfo)
    assert facts.available_mib == 2048.0 and facts.cpus >= 1
    assert machine_facts(tmp_path / "missing").available_mib is None
