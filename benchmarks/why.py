"""Issue "Why": the benchmarks of --profile. Prints figures; asserts nothing. Every part
keeps what it measured under --out (JSON), so ``report`` can print it again later.

    .venv/bin/python benchmarks/why.py quick --times 3 --out DIR
    .venv/bin/python benchmarks/why.py planted --kinds compute,syscalls,crowded \
        --percent 5,10 --times 5 --out DIR
    .venv/bin/python benchmarks/why.py front --times 3 --out DIR
    .venv/bin/python benchmarks/why.py report --out DIR

- quick: ``servelab study quick`` without and with ``--profile``, alternately, TIMES each
  (``--modes``: which of the two, in order),
  each a separate session (a subprocess; validity.py's ``study``): wall time, and whether
  each answer's figure with --profile lies inside the interval of every answer without it
  (and the other way round); the stack's CPU per request both ways (the overhead as
  measured CPU); and, from the profiled sessions, what the explanation says for unix
  socket and keepalive on every seed endpoint and what fraction of the stack's CPU per
  request difference its lines explain.
- planted: the seed app against itself with a planted function of each KIND spinning
  PERCENT % of the stack's CPU per request (measured once per kind's stack without
  profiling, ``calibration.json``), as ``servelab run --profile`` measures it
  (tests/support ``planted_spin_toml``: 5 starts, 3 s windows). The kinds
  (tests/support ``PLANTED_KINDS``): ``compute`` (``extra_work()``, user space),
  ``syscalls`` (``extra_syscalls()``, about half in system calls), ``crowded`` (the
  compute spin with 4 workers on 2 CPUs: py-spy counts waiting as running). Per run:
  whether the planted function is the top contributor of the difference (self time;
  and the inclusive view's first line), and whether its interval holds the planted
  µs/request.

- front: where the front runs while py-spy samples (``FRONT_AWAY``: on the driver's CPUs,
  or on the app's as it is measured), with a neighbour: two copies of the integration
  test's planted experiment (tests/integration/test_profile.py: 300 µs of the compute
  and the syscalls kind, 4 starts of 2 s) at once, each a subprocess, TIMES pairs each
  way, alternately. Per copy and variant: the top contributor, the planted function's
  figure and interval, and asyncio's transport write in the base (µs per request).

Each session holds /tmp/servelab-cpu.lock (flock) while it measures.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import statistics
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from profile_overhead import measure
from support import PLANTED_KINDS, planted_spin_toml
from validity import LOCK, answer, load, save, show, study

PLANTED = "extra_work (servelab/apps/seed_fastapi.py)"
# Where py-spy samples: "after" each measured window, in a window of its own (since
# this benchmark's first sessions); "inside" the measured windows (before; a session
# measured so is marked by hand in quick.json).
DESIGN = "after"
STARTS, WINDOW_S = 5, 3


def _change(change: Any) -> dict[str, Any]:
    interval = change.comparison.interval
    return {"name": change.name, "us": round(change.difference, 1),
            "interval": [round(x, 1) for x in interval] if interval else None}


def profiled(results: Path, result_id: str) -> dict[str, Any]:
    """The stored result's explanations (what its Why section says) and the stack's CPU
    per request per variant and workload."""
    from servelab.analysis.explain import answer_line, explain_all
    from servelab.report.base import ReportInput
    from servelab.report.why import run_profiles
    from servelab.results.store import resolve_result

    store = resolve_result(result_id, results)
    report = ReportInput.from_store(store)
    cpu: dict[str, list[float]] = defaultdict(list)
    for run in store.runs():
        if run.load.requests_total:
            cpu[f"{run.workload}|{run.variant}"].append(
                1e6 * run.stack_cpu_s / run.load.requests_total)
    found = []
    for e in explain_all(run_profiles(report), report.experiment.baseline.name, top=5):
        found.append({
            "workload": e.workload, "variant": e.variant, "starts": list(e.starts),
            "total": _change(e.total), "parts": [_change(c) for c in e.parts],
            "functions": [_change(c) for c in e.functions],
            "unexplained": round(e.unexplained, 1), "line": answer_line(e),
        })
    return {"why": found,
            "stack_cpu_us": {k: round(statistics.fmean(v), 1) for k, v in cpu.items()}}


def quick(out: Path, times: int, modes: tuple[bool, ...]) -> None:
    found = load(out, "quick") or []
    for _ in range(times):
        for profile in modes:
            document = study(out / "results", "quick", *(["--profile"] if profile else []))
            document["profile"] = profile
            if profile:
                document["design"] = DESIGN
            if document["exit"] == 0:
                try:
                    document.update(profiled(out / "results", document["result_id"]))
                except Exception as error:  # keep the session's figures; report it
                    print(f"  could not read its profiles: {error!r}")
            print(f"quick {'with' if profile else 'without'} --profile: exit "
                  f"{document['exit']}, {document['wall_s']:.0f} s wall", flush=True)
            show(document)
            for e in document.get("why", []):
                print(f"    {e['line']}")
            found.append(document)
            save(out, "quick", found)


def planted(out: Path, kinds: list[str], percents: list[float], times: int) -> None:
    found = load(out, "planted") or []
    calibration = load(out, "calibration") or {}
    if "stack_cpu_us_per_request" in calibration:  # measured before kinds: compute's
        calibration = {"compute": calibration}
    for kind in kinds:
        stack = "crowded" if PLANTED_KINDS[kind][2] > 1 else "compute"
        if stack not in calibration:  # the stack's CPU per request, without profiling
            spec = out / f"calibrate-{stack}.toml"
            spec.write_text(planted_spin_toml("why-calibrate", 0, STARTS, WINDOW_S, stack))
            row = measure(spec, out / "results", profile=False)
            calibration[stack] = {"stack_cpu_us_per_request": row["stack_cpu_us"]["base"],
                                  "run": row}
            save(out, "calibration", calibration)
        cpu_us = calibration[stack]["stack_cpu_us_per_request"]
        function = PLANTED_KINDS[kind][1]
        for pct in percents:
            spin = round(pct / 100 * cpu_us)
            spec = out / f"planted-{kind}-{pct:g}.toml"
            spec.write_text(
                planted_spin_toml(f"why-planted-{kind}-{pct:g}", spin, STARTS, WINDOW_S, kind)
            )
            for n in range(1, times + 1):
                row = measure(spec, out / "results", profile=True, function=function)
                row.update(kind=kind, percent=pct, planted_us=spin, function=function)
                print(f"planted {kind} {pct:g} % ({spin} µs of {cpu_us:.0f}) {n}: "
                      f"top {row.get('top') == function}, inclusive top "
                      f"{row.get('inclusive_top') == function}, "
                      f"{row.get('function_us')} {row.get('function_interval')} holds "
                      f"{_inside(spin, row.get('function_interval'))}; {json.dumps(row)}",
                      flush=True)
                found.append(row)
                save(out, "planted", found)


WRITE = "_SelectorSocketTransport.write (asyncio/selector_events.py)"
FRONT_COPIES, FRONT_PLANTED_US, FRONT_STARTS, FRONT_WINDOW_S = 2, 300, 4, 2.0


def front_copy(away: bool) -> dict[str, Any]:
    """One copy of the test's planted experiment measured with --profile in this process,
    the front where ``away`` says while py-spy samples: what its explanations say."""
    import io
    import tempfile

    from rich.console import Console

    import servelab
    from servelab.analysis.explain import explain_all
    from servelab.measuring import host
    from servelab.report.why import run_profiles

    host.FRONT_AWAY = away
    with tempfile.TemporaryDirectory(prefix="servelab-why-front-") as where:
        spec = Path(where) / "why.toml"
        spec.write_text(planted_spin_toml(
            "why-front", FRONT_PLANTED_US, FRONT_STARTS, FRONT_WINDOW_S, also=("syscalls",)))
        result = servelab.measure(
            servelab.Experiment.from_toml(spec),
            servelab.RunOptions(results_dir=Path(where) / "r", profile=True),
            console=Console(file=io.StringIO()),
        )
        row: dict[str, Any] = {"away": away}
        for e in explain_all(run_profiles(result), "base", top=1_000_000):
            function = PLANTED_KINDS["compute" if e.variant == "spin" else e.variant][1]
            found = {c.name: c for c in e.functions}
            row[e.variant] = {
                "top": e.functions[0].name,
                "planted": _change(found[function]) if function in found else None,
                "write_base_us": round(found[WRITE].comparison.baseline_mean, 1)
                if WRITE in found else None,
                "total_us": round(e.total.difference, 1),
            }
    return row


def front(out: Path, times: int) -> None:
    """TIMES pairs of copies each way (front away, front on the app's CPUs), alternately."""
    found = load(out, "front") or []
    for n in range(1, times + 1):
        for away in (False, True):
            with open(LOCK, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                copies = [subprocess.Popen(
                    [sys.executable, __file__, "front-copy", "--out", str(out),
                     *(["--away"] if away else [])],
                    stdout=subprocess.PIPE, text=True,
                ) for _ in range(FRONT_COPIES)]
                said = [copy.communicate()[0] for copy in copies]
            for copy, text in zip(copies, said, strict=True):
                if copy.returncode != 0:
                    print(f"  a copy failed (exit {copy.returncode})")
                    continue
                row = json.loads(text.strip().splitlines()[-1])
                print(f"front {'away' if away else 'with the app'} {n}: {json.dumps(row)}",
                      flush=True)
                found.append(row)
            save(out, "front", found)


# -- report ----------------------------------------------------------------------------


def _inside(value: float, interval: list[float] | None) -> bool:
    return interval is not None and interval[0] <= value <= interval[1]


def _spread(values: list[float], unit: str = "") -> str:
    if not values:
        return "-"
    return (f"{statistics.fmean(values):.1f}{unit} ({min(values):.1f}…{max(values):.1f}, "
            f"n={len(values)})")


def _share(part: float, total: float) -> str:
    return f"{100 * part / total:.0f} %" if total else "-"


def _figures(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"{c['change_pct']:+.1f} [{c['interval_pct'][0]:+.1f}, "
                     f"{c['interval_pct'][1]:+.1f}]" for c in rows if c["interval_pct"])


def agreement(label: str, plain: list[dict[str, Any]], other: list[dict[str, Any]]) -> None:
    """Each answer's figure of ``other`` inside each interval of ``plain`` (the sessions
    without --profile), and the other way round; the stack's CPU per request both ways."""
    print(f"the answers ({label}): each figure inside each interval without, and the "
          "other way round")
    tally = [0, 0, 0]  # other in plain, plain in other, pairs
    keys = sorted({(c["workload"], c["variant"]) for d in plain for c in answer(d)})
    for key in keys:
        def rows(documents: list[dict[str, Any]], k: tuple[str, str] = key) -> list[Any]:
            return [c for d in documents for c in answer(d)
                    if (c["workload"], c["variant"]) == k]
        a, b = rows(plain), rows(other)
        ins = sum(_inside(y["change_pct"], x["interval_pct"]) for x in a for y in b)
        back = sum(_inside(x["change_pct"], y["interval_pct"]) for x in a for y in b)
        tally = [tally[0] + ins, tally[1] + back, tally[2] + len(a) * len(b)]
        print(f"  {key[0]:12} {key[1]:22} without {_figures(a)}; {label} {_figures(b)}; "
              f"in: {ins}/{len(a) * len(b)}, back: {back}/{len(a) * len(b)}")
    print(f"  in all: {label} figures inside without-profile intervals {tally[0]} of "
          f"{tally[2]}; without inside {label} intervals {tally[1]} of {tally[2]}")
    # For reference: sessions without --profile against each other (quick's own spread).
    pairs = [(x, y) for i, a in enumerate(plain) for j, b in enumerate(plain) if i != j
             for x in answer(a) for y in answer(b)
             if (x["workload"], x["variant"]) == (y["workload"], y["variant"])]
    print(f"  for reference, without against without: a figure inside another session's "
          f"interval {sum(_inside(y['change_pct'], x['interval_pct']) for x, y in pairs)} "
          f"of {len(pairs)}")
    print(f"the stack's CPU per request (µs), mean of sessions: without -> {label}")
    for key in sorted(plain[0].get("stack_cpu_us", {})):
        a = [d["stack_cpu_us"][key] for d in plain if key in d.get("stack_cpu_us", {})]
        b = [d["stack_cpu_us"][key] for d in other if key in d.get("stack_cpu_us", {})]
        if a and b:
            print(f"  {key:40} {statistics.fmean(a):7.1f} -> {statistics.fmean(b):7.1f} "
                  f"({100 * (statistics.fmean(b) / statistics.fmean(a) - 1):+.1f} %)")


def report_front(rows: list[dict[str, Any]]) -> None:
    for away in (False, True):
        mine = [r for r in rows if r["away"] == away]
        if not mine:
            continue
        print(f"front {'on the driver CPUs' if away else 'on the app CPUs'} while sampled "
              f"({len(mine)} copies, {FRONT_COPIES} at once):")
        for variant in ("spin", "syscalls"):
            got = [r[variant] for r in mine if variant in r]
            function = PLANTED_KINDS["compute" if variant == "spin" else variant][1]
            top = sum(g["top"] == function for g in got)
            planted_us = [g["planted"]["us"] for g in got if g["planted"]]
            held = sum(_inside(FRONT_PLANTED_US, (g["planted"] or {}).get("interval"))
                       for g in got)
            writes = [g["write_base_us"] for g in got if g["write_base_us"] is not None]
            print(f"  {variant}: top in {top} of {len(got)}; planted {FRONT_PLANTED_US} µs "
                  f"read {_spread(planted_us, ' µs')}, interval holds it in {held}; base "
                  f"write {_spread(writes, ' µs')} a request")


def report(out: Path) -> None:
    report_front(load(out, "front") or [])
    sessions = [d for d in load(out, "quick") or [] if d["exit"] == 0]
    plain = [d for d in sessions if not d["profile"]]
    inside = [d for d in sessions if d["profile"] and d.get("design") == "inside"]
    sampled = [d for d in sessions if d["profile"] and d.get("design") != "inside"]
    for label, mine in (("without", plain), ("with --profile", sampled),
                        ("with --profile sampling inside the measured windows", inside)):
        if mine:
            print(f"quick {label}: wall {_spread([d['wall_s'] for d in mine], ' s')}; "
                  f"{sum(c['clear'] for d in mine for c in answer(d))} of "
                  f"{sum(len(answer(d)) for d in mine)} answers clear")
    for label, other in (("with --profile", sampled), ("sampling inside", inside)):
        if plain and other:
            agreement(label, plain, other)
    if sampled:
        print("the explanations (profiled sessions): stack CPU difference, the lines, and the "
              "fraction the top 2 (the answer's line) and top 5 explain")
        for d in sampled:
            for e in d["why"]:
                total = e["total"]["us"]
                top2 = sum(f["us"] for f in e["functions"][:2])
                top5 = sum(f["us"] for f in e["functions"])
                print(f"  {e['line']}")
                print(f"      top 2 explain {_share(top2, total)}, top 5 "
                      f"{_share(top5, total)}; by part: "
                      + "; ".join(f"{p['name']} {p['us']:+.1f}" for p in e["parts"]))
    rows = load(out, "planted") or []
    calibration = load(out, "calibration") or {}
    if "stack_cpu_us_per_request" in calibration:
        calibration = {"compute": calibration}
    for stack, figures in sorted(calibration.items()):
        print(f"calibration ({stack}): stack CPU {figures['stack_cpu_us_per_request']:.0f} "
              f"µs/request (no spin, without profiling)")
    for kind, pct in sorted({(r.get("kind", "compute"), r["percent"]) for r in rows}):
        mine = [r for r in rows if (r.get("kind", "compute"), r["percent"]) == (kind, pct)]
        planted_us = mine[0]["planted_us"]
        function = mine[0].get("function", PLANTED)
        top = sum(r.get("top") == function for r in mine)
        inclusive = sum(r.get("inclusive_top") == function for r in mine)
        covered = sum(_inside(planted_us, r.get("function_interval")) for r in mine)
        print(f"planted {kind} {pct:g} % ({planted_us} µs/request): top contributor in "
              f"{top} of {len(mine)} (inclusive view: {inclusive}); its estimate "
              + ", ".join(f"{r.get('function_us', float('nan')):.1f} "
                          f"{r.get('function_interval')}" for r in mine)
              + f"; interval holds the planted figure in {covered} of {len(mine)}"
              + "; waited " + ", ".join(f"{r.get('waited', float('nan')):.2f}" for r in mine)
              + "; answers " + ", ".join(f"{r['change_pct']:+.1f} %" for r in mine) + "; wall "
              + _spread([r["wall_s"] for r in mine], " s"))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.dedent(__doc__.split("\n\n", 1)[1]),
    )
    parser.add_argument("part", choices=["quick", "planted", "front", "front-copy", "report"])
    parser.add_argument("--out", type=Path, required=True, help="results and figures go here")
    parser.add_argument("--times", type=int, default=3)
    parser.add_argument("--percent", default="5,10")
    parser.add_argument("--kinds", default="compute,syscalls,crowded",
                        help="planted: which planted functions, in order")
    parser.add_argument("--modes", default="without,with",
                        help="quick: which sessions each time, in order")
    parser.add_argument("--away", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part == "front-copy":  # one copy of the front part, in a process of its own
        print(json.dumps(front_copy(args.away)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part == "quick":
        modes = tuple(m.strip() == "with" for m in args.modes.split(","))
        quick(args.out, args.times, modes)
    elif args.part == "front":
        front(args.out, args.times)
    elif args.part == "planted":
        planted(args.out, args.kinds.split(","), [float(p) for p in args.percent.split(",")],
                args.times)
    report(args.out)


if __name__ == "__main__":
    main()
