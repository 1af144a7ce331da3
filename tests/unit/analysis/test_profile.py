"""Folded stacks to CPU per request, by part and function (synthetic profiles: no
py-spy)."""

from __future__ import annotations

import pytest
from support import fake_load, fake_run

from servelab.analysis.profile import (
    KERNEL,
    NOT_PROFILED,
    frame_function,
    parse_folded,
    part_cpu_s,
    run_profile,
    sampled_per_cpu_s,
)
from servelab.observe.profile import IN_KERNEL
from servelab.results.records import ProcessUsage, ProfileInfo

from .profiles import PLANTED, planted_run, sampled_run, usage


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


def test_a_run_adds_up_to_its_stack_cpu_per_request() -> None:
    profile = sampled_run("slow", 1, 0.05)
    assert profile.total == pytest.approx(1e6 * (0.4 + 0.02 + 1.05) / 1000)
    assert sum(profile.stacks.values()) == pytest.approx(profile.total)
    assert profile.stacks[("nginx", NOT_PROFILED)] == pytest.approx(400.0)
    functions = profile.functions()
    assert functions["spin (app.py)"] == pytest.approx(50.0)
    assert functions["handle (app.py)"] == pytest.approx(1000.0)
    assert functions[f"nginx {NOT_PROFILED}"] == pytest.approx(400.0)


def test_a_single_process_server_is_one_part() -> None:
    run = fake_run(
        "v", "w", 1, load=fake_load(requests=100), processes=(usage("app", 10, 0.1),),
        profile=ProfileInfo(file="f", samples=0, rate_hz=100, masters=(10,)),
    )
    profile = run_profile(run, "app master;serve (srv.py:3) 10\n")
    assert profile.parts == pytest.approx({"app": 1000.0})
    assert profile.stacks == pytest.approx({("app", "serve (srv.py:3)"): 1000.0})


def test_a_crowded_stack_profiled_at_its_own_concurrency_is_scaled_to_that_window() -> None:
    """ProfileInfo.concurrency: the samples share the profiling window's CPU over its
    requests, not the measured window's (whose load was another)."""
    run = fake_run(
        "v", "w", 1, load=fake_load(requests=1000), processes=(usage("app", 10, 0.9),),
        profile=ProfileInfo(file="f", samples=0, rate_hz=100, masters=(10,), concurrency=1,
                            processes=(usage("app", 10, 0.3),), requests=200),
    )
    profile = run_profile(run, "app master;serve (srv.py:3) 30\napp master;spin (app.py:9) 10\n")
    assert profile.parts == pytest.approx({"app": 1500.0})  # 0.3 s / 200, not 0.9 s / 1000
    assert profile.functions() == pytest.approx({"serve (srv.py)": 1125.0, "spin (app.py)": 375.0})
    assert profile.concurrency == 1
    assert run_profile(run.model_copy(update={"profile": run.profile.model_copy(
        update={"concurrency": None})}), "app master;spin (app.py:9) 10\n").parts == (
        pytest.approx({"app": 900.0})
    )


def test_sampled_seconds_per_cpu_second_leave_out_threads_waiting_on_a_lock() -> None:
    stacks = {"app workers;serve (srv.py:3)": 30, "app workers;spin (app.py:9)": 10,
              "app workers;Queue.get (queue.py:171);Condition.wait (threading.py:327)": 500}
    assert sampled_per_cpu_s(stacks, 100, 0.2) == pytest.approx(2.0)  # 0.4 s for 0.2
    assert sampled_per_cpu_s(stacks, 100, 0.0) is None


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
    profile = sampled_run("slow", 1, 0.05)  # its processes recorded no system time
    assert not any(KERNEL in stack for stack in profile.stacks)
    assert profile.functions()["handle (app.py)"] == pytest.approx(1000.0)


@pytest.mark.parametrize("kind", ["compute", "syscalls", "crowded"])
def test_a_planted_function_of_each_kind_keeps_its_size(kind: str) -> None:
    """f() costs 300 µs/request: in user space, half of it in system calls (its samples
    mostly in the kernel), or in a worker that waits for its CPU; the worker's own
    sending is kernel time, its selector's and the GIL's waits are samples py-spy counts
    as busy."""
    profile = planted_run("slow", 1, kind, 300.0)
    functions = profile.functions()
    assert functions[PLANTED] == pytest.approx(300.0)
    assert functions["respond (srv.py)"] == pytest.approx(200.0)  # its system calls
    assert functions["handle (app.py)"] == pytest.approx(600.0)
    assert not any("select" in name for name in functions)  # woken, not running
    assert not any(KERNEL in name for name in functions if name.startswith("app"))
    assert sum(profile.stacks.values()) == pytest.approx(profile.total)


def test_kernel_time_is_charged_to_the_frames_that_made_the_system_calls() -> None:
    """f() makes system calls for half of its 300 µs: shared out as user time only, with
    the worker's system time as a line of its own, it would read 300 * 1150/1350 * 9/114
    = 20 µs (the user/system split of its samples is not its time's)."""
    profile = planted_run("slow", 1, "syscalls", 300.0)
    kernel = sum(v for s, v in profile.stacks.items()
                 if s[0] != "nginx" and s[-1] in (KERNEL, IN_KERNEL))
    assert kernel == pytest.approx(0.0)  # none left on its own: nginx is not sampled
    assert profile.stacks[("nginx", KERNEL)] == pytest.approx(200.0)
    assert profile.functions()[PLANTED] == pytest.approx(300.0)
    f_stacks = [s for s in profile.stacks if s[-1].startswith("f (app.py")]
    assert f_stacks == [("app workers", "main (srv.py:1)", "handle_request (srv.py:5)",
                         "f (app.py:12)")]  # its system calls' samples merged into it


def test_a_part_whose_samples_cannot_say_keeps_its_kernel_line() -> None:
    # Profiles stored before py-spy unwound native frames: no sample says it was in the
    # kernel, and the part's system time stays a line of its own.
    profile = planted_run("slow", 1, "compute", 300.0)
    assert (("app workers", KERNEL) not in profile.stacks)
    worker = ProcessUsage(role="app", pid=11, name="w", cpu_s=1.5, peak_rss_bytes=0,
                          system_s=0.5)
    run = fake_run(
        "v", "w", 1, load=fake_load(requests=1000), processes=(worker,),
        profile=ProfileInfo(file="f", samples=0, rate_hz=100, masters=(11,)),
    )
    old = run_profile(run, "app master;main (srv.py:1) 100\n")
    assert old.stacks[("app", KERNEL)] == pytest.approx(500.0)
    assert old.stacks[("app", "main (srv.py:1)")] == pytest.approx(1000.0)
    new = run_profile(run, f"app master;main (srv.py:1) 100\napp master;{IN_KERNEL} 10\n")
    assert new.stacks[("app", KERNEL)] == pytest.approx(1500.0 / 11)  # no Python frame
    assert new.stacks[("app", "main (srv.py:1)")] == pytest.approx(1500.0 * 10 / 11)
