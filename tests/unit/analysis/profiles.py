"""What the profile and explanation tests share: runs with synthetic folded stacks (no
py-spy), built as ``analysis.profile.run_profile`` reads them."""

from __future__ import annotations

from support import fake_load, fake_run

from servelab.analysis.profile import RunProfile, run_profile
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
