"""What the profile and explanation tests share: runs with synthetic folded stacks (no
py-spy), built as ``analysis.profile.run_profile`` reads them."""

from __future__ import annotations

from collections import defaultdict

from support import fake_load, fake_run

from servelab.analysis.profile import RunProfile, run_profile
from servelab.observe.profile import IN_KERNEL, WAITING_IN_KERNEL
from servelab.results.records import ProcessUsage, ProfileInfo


def usage(role: str, pid: int, cpu_s: float) -> ProcessUsage:
    return ProcessUsage(role=role, pid=pid, name=role, cpu_s=cpu_s, peak_rss_bytes=0)


def sampled_run(variant: str, repetition: int, spin_s: float, *, requests: int = 1000):
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


def folded_run(variant: str, repetition: int, lines: dict[str, float]) -> RunProfile:
    """One app process whose CPU (µs per request, 1000 requests) is ``lines``' values."""
    cpu_s = sum(lines.values()) / 1000
    run = fake_run(
        variant, "w", repetition, load=fake_load(requests=1000),
        processes=(usage("app", 10, cpu_s),),
        profile=ProfileInfo(file="f", samples=0, rate_hz=100, masters=(10,)),
    )
    return run_profile(run, "".join(f"app master;{s} {v}\n" for s, v in lines.items()))


def app_lines(piece: float, lex: float, tree: float) -> dict[str, float]:
    """main() calls render() (five pieces of ``piece`` each), parse() (lex and tree) and
    idle()."""
    pieces = {f"main (m.py:1);render (r.py:2);piece{i} (r.py:{i})": piece for i in range(5)}
    return pieces | {
        "main (m.py:1);parse (p.py:1);lex (p.py:5)": lex,
        "main (m.py:1);parse (p.py:1);tree (p.py:9)": tree,
        "main (m.py:1);idle (m.py:7)": 300.0,
    }


# A worker's CPU per request (µs) by what it does, as py-spy --native samples it (one
# sample per 10 µs of CPU; IN_KERNEL: in a system call, WAITING_IN_KERNEL: woken and
# waiting for a CPU). handle() computes, respond() sends (kernel time), housekeep() is
# the worker's own loop; the planted function f() sits beside handle() and respond().
REQUEST = "main (srv.py:1);handle_request (srv.py:5)"
WORKER: dict[str, tuple[float, float]] = {  # stack -> (user µs, system µs)
    f"{REQUEST};handle (app.py:7)": (600.0, 0.0),
    f"{REQUEST};respond (srv.py:9)": (0.0, 200.0),
    "main (srv.py:1);housekeep (srv.py:20)": (200.0, 0.0),
}
PLANTED = "f (app.py)"


def planted_lines(kind: str, planted_us: float) -> dict[str, float]:
    """Folded samples of one worker, with ``planted_us`` in f() of ``kind``: "compute"
    (all user time), "syscalls" (half of it in system calls, its samples 70 % in the
    kernel: py-spy's stop lands at the thread's next system call), "crowded" (twice as
    many samples as CPU, as a worker waiting for its CPU half the time; and the waits
    py-spy counts as busy: an epoll_wait returning, a thread retaking the GIL)."""
    kernel_share = {"compute": 0.0, "syscalls": 0.7, "crowded": 0.0}[kind]
    wait = 2.0 if kind == "crowded" else 1.0
    lines: dict[str, float] = defaultdict(float)
    for stack, (user, system) in WORKER.items():
        lines[stack] += wait * user / 10
        if system:
            lines[f"{stack};{IN_KERNEL}"] += wait * system / 10
    if planted_us:
        f = f"{REQUEST};f (app.py:12)"
        lines[f] += wait * planted_us * (1 - kernel_share) / 10
        if kernel_share:
            lines[f"{f};{IN_KERNEL}"] += wait * planted_us * kernel_share / 10
    lines[f"main (srv.py:1);EpollSelector.select (selectors.py:468);{WAITING_IN_KERNEL}"] = 50
    if kind == "crowded":
        lines[f"{REQUEST};handle (app.py:7);{WAITING_IN_KERNEL}"] += 40
        lines[f"main (srv.py:1);EpollSelector.select (selectors.py:468);{WAITING_IN_KERNEL}"] += 100
    return dict(lines)


def planted_run(
    variant: str, repetition: int, kind: str, planted_us: float, *, noise: float = 0.0
) -> RunProfile:
    """A run of nginx and one app worker (1000 requests) whose f() costs ``planted_us``
    of ``kind`` (``planted_lines``), the worker's user and system time measured; ``noise``
    (µs/request) more or less of respond()'s sending, in CPU and samples alike."""
    system_share = 0.5 if kind == "syscalls" else 0.0
    user = sum(u for u, _ in WORKER.values()) + planted_us * (1 - system_share)
    system = sum(s for _, s in WORKER.values()) + planted_us * system_share + noise
    worker = ProcessUsage(role="app", pid=11, name="w", cpu_s=(user + system) / 1000,
                          peak_rss_bytes=0, system_s=system / 1000)
    master = ProcessUsage(role="app", pid=10, name="m", cpu_s=0.0, peak_rss_bytes=0,
                          system_s=0.0)
    front = ProcessUsage(role="nginx", pid=5, name="nginx", cpu_s=0.3, peak_rss_bytes=0,
                         system_s=0.2)
    run = fake_run(
        variant, "w", repetition, load=fake_load(requests=1000),
        processes=(front, master, worker),
        profile=ProfileInfo(file="f", samples=0, rate_hz=100, masters=(10,)),
    )
    lines = planted_lines(kind, planted_us)
    lines[f"{REQUEST};respond (srv.py:9);{IN_KERNEL}"] += noise / 10
    return run_profile(run, "".join(f"app workers;{s} {v}\n" for s, v in lines.items()))
