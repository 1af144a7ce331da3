"""Issue "Verdicts you can trust": servelab's answers against a ground truth it keeps.
Prints figures; asserts nothing. Every part keeps its results under --out, so that
``report`` can put them together later (and a part can be run again on its own).

    .venv/bin/python benchmarks/validity.py quick --times 5 --out DIR   # as a user runs it
    .venv/bin/python benchmarks/validity.py truth --budget 15m --out DIR
    .venv/bin/python benchmarks/validity.py waiting --out DIR           # an app that waits
    .venv/bin/python benchmarks/validity.py aa --times 20 --out DIR
    .venv/bin/python benchmarks/validity.py planted --percent 3,5,10 --times 10 --out DIR
    .venv/bin/python benchmarks/validity.py report --out DIR

- quick: ``servelab study quick`` with its defaults, N times, each a separate session
  (a subprocess, timed): wall time and every answer.
- truth: the same stacks measured the seeds' way, each alone with the whole stack CPU
  (``--in-turns``), many rounds (``--precision 1 --budget``): requests/s.
- waiting: a WSGI app that waits 3 ms a request (gunicorn gthread, 2 workers x 1
  thread): quick on it, then the same stacks in turns (``-r 5``): do they agree?
- aa: quick's design with both variants identical to the baseline (8 comparisons of
  identical stacks a study): how many studies call any difference, how often the
  95 % intervals cover 0, and each half-width per minute of the pair's measured
  windows (to set against the floor, docs/statistics.md).
- planted: quick's design on async-small, the variant's app spinning PERCENT % of the
  stack's measured CPU per request (by CPU time: SERVELAB_EXTRA_WORK_US); the expected
  change of requests per CPU second is 1 / (1 + PERCENT/100) - 1.
- report: quick vs truth (sign, overlap), between-session heterogeneity of the quick
  answers (Cochran's Q, I^2), A/A rates, planted detection and coverage.

``--switch`` measures quick, aa and planted with switched passes (``servelab --switch``):
use a --out of its own.

Run it alone on the machine (it holds /tmp/servelab-cpu.lock while measuring).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SERVELAB = str(Path(sys.executable).with_name("servelab"))
LOCK = "/tmp/servelab-cpu.lock"
WAITING_APP = '''\
import time


def app(environ, start_response):
    time.sleep(0.003)  # a database round trip, say: the worker waits, its CPU idles
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
'''


@contextlib.contextmanager
def machine() -> Iterator[None]:
    """The machine to ourselves (benchmarks and locked test runs wait for each other)."""
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def servelab(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    began = time.monotonic()
    done = subprocess.run([SERVELAB, *args], capture_output=True, text=True)
    return done, time.monotonic() - began


def comparisons(results: Path, result_id: str) -> dict[str, Any]:
    shown, _ = servelab("results", "show", "--results", str(results), "--json", result_id)
    return json.loads(shown.stdout)


def study(results: Path, *args: str) -> dict[str, Any]:
    """``servelab study ARGS`` as a user runs it: its answer, wall time and exit code."""
    with machine():
        done, wall = servelab("study", *args, "--results", str(results))
    if done.returncode != 0:
        print(f"  exit {done.returncode}: {done.stderr.strip()[-1500:]}")
        return {"exit": done.returncode, "wall_s": wall, "comparisons": []}
    result_id = next(
        line.split("#")[1].split()[0] for line in done.stdout.splitlines()
        if line.startswith("result #")
    )
    document = comparisons(results, result_id)
    notes = [line.strip() for line in done.stdout.splitlines()
             if "measuring stopped" in line or "measuring in turns" in line]
    return {"exit": 0, "wall_s": wall, "lines": len(done.stdout.splitlines()),
            "notes": notes, "result_id": result_id, **document}


def answer(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in document.get("comparisons", [])
            if c["metric"] == document.get("answer_metric")]


def show(document: dict[str, Any]) -> None:
    for c in answer(document):
        low, high = c["interval_pct"] or (math.nan, math.nan)
        print(f"    {c['workload']:12} {c['variant']:22} {c['change_pct']:+6.1f} % "
              f"[{low:+6.1f}, {high:+6.1f}] {c['verdict']:26} "
              f"{'clear' if c['clear'] else 'NOT CLEAR'} ({c['restarts'][1]} starts, "
              f"{c['df']} df)")
    for note in document.get("notes", []):
        print(f"    {note}")


def save(out: Path, name: str, value: Any) -> None:
    (out / f"{name}.json").write_text(json.dumps(value, indent=1))


def load(out: Path, name: str) -> Any:
    path = out / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


# -- parts ---------------------------------------------------------------------------


def quick(out: Path, times: int, switching: bool = False) -> None:
    found = load(out, "quick") or []
    for n in range(len(found) + 1, len(found) + times + 1):
        document = study(out / "results", "quick", *(["--switch"] if switching else []))
        print(f"quick {n}: exit {document['exit']}, {document['wall_s']:.0f} s wall, "
              f"{document.get('lines', 0)} lines of output")
        show(document)
        found.append(document)
        save(out, "quick", found)


def truth(out: Path, budget: str) -> None:
    document = study(out / "results", "quick", "--in-turns", "--precision", "1",
                     "--budget", budget, "-r", "3")
    print(f"truth (in turns, budget {budget}): {document['wall_s']:.0f} s")
    show(document)
    save(out, "truth", document)


def waiting(out: Path) -> None:
    app_dir = out / "waiting-app"
    app_dir.mkdir(parents=True, exist_ok=True)
    (app_dir / "waits.py").write_text(WAITING_APP)
    common = ("quick", "--app", "waits:app", "--app-dir", str(app_dir))
    fast = study(out / "results", *common)
    print(f"waiting app, quick: {fast['wall_s']:.0f} s")
    show(fast)
    slow = study(out / "results", *common, "--in-turns", "-r", "5")
    print(f"waiting app, in turns -r 5: {slow['wall_s']:.0f} s")
    show(slow)
    save(out, "waiting", {"quick": fast, "truth": slow})


def measure_quietly(experiment, root: Path) -> tuple[list, float]:
    """The experiment's runs, and its wall time once the machine was ours (the time
    waiting for the lock left out)."""
    from rich.console import Console

    from servelab.host.cpus import default_cpu_plan
    from servelab.session import ExperimentSession

    with open("/dev/null", "w") as null, machine():
        began = time.monotonic()
        quiet = Console(file=null)
        runs = ExperimentSession(
            experiment, default_cpu_plan(), root, console=quiet, out=quiet
        ).run().runs()
        return runs, time.monotonic() - began


def quick_experiment(endpoints: tuple[str, ...] | None = None, switching: bool = False):
    """quick as ``servelab study quick`` builds it on this machine (in turns or side by
    side: api.build_study), with switched passes where asked (``--switch``)."""
    from servelab.api import build_study
    from servelab.config.run import RunOptions
    from servelab.studies import StudyOptions, get_study

    experiment, _ = build_study(get_study("quick"), StudyOptions(endpoints=endpoints), RunOptions())
    return experiment.model_copy(update={"switching": switching})


def window_seconds(runs) -> dict[str, float]:
    """Each variant's measured windows on each workload, seconds ("variant|workload")."""
    seconds: dict[str, float] = {}
    for run in runs:
        key = f"{run.variant}|{run.workload}"
        seconds[key] = seconds.get(key, 0.0) + run.load.duration_s
    return seconds


def per_minute(document: dict[str, Any]) -> dict[str, list[float]]:
    """Each comparison's 95 % half-width scaled to one minute of its two variants'
    measured windows (half-width x sqrt(minutes)), by workload: against the floor
    (docs/statistics.md), what a design makes of the time it measures."""
    found: dict[str, list[float]] = {}
    windows = document.get("window_s") or {}
    for c in answer(document):
        pair = [windows.get(f"{v}|{c['workload']}") for v in (document["baseline"], c["variant"])]
        if c["interval_pct"] is None or None in pair:
            continue
        half = (c["interval_pct"][1] - c["interval_pct"][0]) / 2
        found.setdefault(c["workload"], []).append(half * math.sqrt(sum(pair) / 60))
    return found


def aa(out: Path, times: int, switching: bool = False) -> None:
    from servelab.analysis.analyze import analyze, comparisons_document

    found = load(out, "aa") or []
    base = quick_experiment(switching=switching)
    twins = tuple(base.baseline.model_copy(update={"name": f"A{i}"}) for i in (2, 3))
    experiment = base.model_copy(update={"name": "a-a", "variants": twins})
    for n in range(len(found) + 1, len(found) + times + 1):
        runs, wall_s = measure_quietly(experiment, out / "results")
        document = comparisons_document(analyze(experiment, runs))
        document["wall_s"] = wall_s
        document["window_s"] = window_seconds(runs)
        said = [c for c in answer(document) if c["verdict"] in ("better", "worse")]
        print(f"A/A {n}: {document['wall_s']:.0f} s, {len(said)} of 8 called better/worse")
        show(document)
        found.append(document)
        save(out, "aa", found)


def planted(out: Path, percents: list[float], times: int, switching: bool = False) -> None:
    from servelab.analysis.analyze import analyze, comparisons_document

    found = load(out, "planted") or []
    base = quick_experiment(("async-small",), switching)
    if not found:  # calibrate: the stack's CPU per request, identical stacks
        twin = base.baseline.model_copy(update={"name": "A2"})
        runs, _ = measure_quietly(
            base.model_copy(update={"name": "calibrate", "variants": (twin,)}), out / "results"
        )
        cpu_us = 1e6 * sum(r.stack_cpu_s for r in runs) / sum(r.load.requests_total for r in runs)
        save(out, "calibration", {"stack_cpu_us_per_request": cpu_us})
    cpu_us = load(out, "calibration")["stack_cpu_us_per_request"]
    for pct in percents:
        spin = round(pct / 100 * cpu_us)
        slow = base.baseline.model_copy(update={
            "name": f"spin-{pct:g}pct",
            "app": base.baseline.app.model_copy(
                update={"env": {"SERVELAB_EXTRA_WORK_US": str(spin)}}
            ),
        })
        experiment = base.model_copy(update={"name": "planted", "variants": (slow,)})
        expected = 100 * (1 / (1 + pct / 100) - 1)
        for n in range(1, times + 1):
            runs, wall_s = measure_quietly(experiment, out / "results")
            document = comparisons_document(analyze(experiment, runs))
            document.update(wall_s=wall_s, percent=pct, spin_us=spin,
                            expected_pct=expected)
            print(f"planted {pct:g} % ({spin} µs of {cpu_us:.0f}; expected {expected:+.1f} %) "
                  f"{n}: {document['wall_s']:.0f} s")
            show(document)
            found.append(document)
            save(out, "planted", found)


# -- report ----------------------------------------------------------------------------


def by_key(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["workload"], c["variant"]): c for c in answer(document)}


def cochran_q(estimates: list[float], halves: list[float]) -> tuple[float, float, float]:
    """Cochran's Q over sessions (each estimate with its 95 % half-width), its p-value,
    and I^2 (the share of the spread that is between sessions)."""
    from scipy import stats

    weights = [(1.96 / h) ** 2 for h in halves]
    mean = sum(w * e for w, e in zip(weights, estimates, strict=True)) / sum(weights)
    q = sum(w * (e - mean) ** 2 for w, e in zip(weights, estimates, strict=True))
    df = len(estimates) - 1
    return q, float(stats.chi2.sf(q, df)), max(0.0, (q - df) / q) if q > 0 else 0.0


def cpu_per_request(results: Path) -> None:
    """The planted experiments' stack CPU per request by role, measured: what the planted
    spin did to the whole stack (its change is what requests per CPU second answers)."""
    from servelab.results.database import DB_FILE, Database

    database = Database(results / DB_FILE)
    changes = []
    for experiment in database.list_experiments():
        if experiment.name != "planted":
            continue
        totals: dict[str, dict[str, float]] = {}
        for run in database.runs(experiment.id):
            mine = totals.setdefault(run.variant, {"requests": 0.0})
            mine["requests"] += run.load.requests_total
            for p in run.processes:
                mine[p.role] = mine.get(p.role, 0.0) + p.cpu_s
        per = {
            variant: {role: 1e6 * cpu / t["requests"] for role, cpu in t.items()
                      if role != "requests"}
            for variant, t in totals.items()
        }
        base, spun = (per[name] for name in totals)  # baseline first, as stored
        change = 100 * (sum(base.values()) / sum(spun.values()) - 1)
        changes.append(change)
        print(f"  planted #{experiment.id}: µs/request by role "
              + ", ".join(f"{role} {base[role]:.0f}->{spun.get(role, 0):.0f}" for role in base)
              + f"; requests per CPU second from these totals {change:+.1f} %")
    if changes:
        print(f"  requests per CPU second from the measured CPU per request: "
              f"{min(changes):+.1f} … {max(changes):+.1f} %")


def report(out: Path) -> None:
    quicks = [q for q in load(out, "quick") or [] if q["exit"] == 0]
    ground = load(out, "truth")
    if quicks:
        walls = [q["wall_s"] for q in quicks]
        print(f"quick x{len(quicks)}: wall {min(walls):.0f}-{max(walls):.0f} s "
              f"(median {statistics.median(walls):.0f}); "
              f"{sum(c['clear'] for q in quicks for c in answer(q))} of "
              f"{sum(len(answer(q)) for q in quicks)} answers clear")
    if quicks and ground:
        truth_rows = {(c["workload"], c["variant"]): c for c in ground["comparisons"]
                      if c["metric"] == "rps"}
        agree = overlap = total = 0
        for q in quicks:
            for key, c in by_key(q).items():
                t = truth_rows.get(key)
                if t is None or t["interval_pct"] is None or c["interval_pct"] is None:
                    continue
                total += 1
                agree += (c["change_pct"] > 0) == (t["change_pct"] > 0)
                overlap += (c["interval_pct"][0] <= t["interval_pct"][1]
                            and t["interval_pct"][0] <= c["interval_pct"][1])
        print(f"quick vs the in-turns truth: same sign {agree} of {total}, intervals overlap "
              f"{overlap} of {total}")
        for key, t in sorted(truth_rows.items()):
            got = [by_key(q).get(key) for q in quicks]
            print(f"  {key[0]:12} {key[1]:22} truth {t['change_pct']:+6.1f} % "
                  f"[{t['interval_pct'][0]:+.1f}, {t['interval_pct'][1]:+.1f}]; quick: "
                  + ", ".join(f"{c['change_pct']:+.1f}" for c in got if c))
    if len(quicks) >= 2:
        print("between sessions (Cochran's Q over the quick runs' answers):")
        for key in sorted(by_key(quicks[0])):
            rows = [by_key(q).get(key) for q in quicks]
            rows = [c for c in rows if c and c["half_width_pct"]]
            if len(rows) < 2:
                continue
            q, p, i2 = cochran_q([c["change_pct"] for c in rows],
                                 [c["half_width_pct"] for c in rows])
            print(f"  {key[0]:12} {key[1]:22} Q {q:5.1f} on {len(rows) - 1} df, p {p:.3f}, "
                  f"I² {100 * i2:.0f} %")
    runs = load(out, "aa") or []
    if runs:
        answers = [c for d in runs for c in answer(d)]
        false = sum(any(c["verdict"] in ("better", "worse") for c in answer(d)) for d in runs)
        covered = sum(c["interval_pct"] is not None
                      and c["interval_pct"][0] <= 0 <= c["interval_pct"][1] for c in answers)
        print(f"A/A x{len(runs)}: {false} studies called any difference "
              f"({100 * false / len(runs):.0f} %); 95 % intervals covered 0 in {covered} of "
              f"{len(answers)} ({100 * covered / len(answers):.1f} %)")
        scaled: dict[str, list[float]] = {}
        for d in runs:
            for workload, values in per_minute(d).items():
                scaled.setdefault(workload, []).extend(values)
        for workload, values in scaled.items():
            print(f"  {workload:12} half-width per minute of the pair's windows: median "
                  f"±{statistics.median(values):.1f} % over {len(values)} comparisons")
    rows = load(out, "planted") or []
    for pct in sorted({d["percent"] for d in rows}):
        mine = [d for d in rows if d["percent"] == pct]
        found = [c for d in mine for c in answer(d)]
        worse = sum(c["verdict"] == "worse" for c in found)
        expected = mine[0]["expected_pct"]
        covered = sum(c["interval_pct"][0] <= expected <= c["interval_pct"][1] for c in found
                      if c["interval_pct"])
        print(f"planted {pct:g} % (expected {expected:+.1f} %): worse in {worse} of "
              f"{len(found)}; estimates "
              + ", ".join(f"{c['change_pct']:+.1f}" for c in found)
              + f"; interval covers the planted size in {covered} of {len(found)}")
    if rows:
        cpu_per_request(out / "results")
    waits = load(out, "waiting")
    if waits:
        fast, slow = by_key(waits["quick"]), by_key(waits["truth"])
        print("waiting app: quick vs in turns")
        for key in sorted(fast):
            c, t = fast[key], slow.get(key)
            if t is None:
                continue
            overlap = (c["interval_pct"] and t["interval_pct"]
                       and c["interval_pct"][0] <= t["interval_pct"][1]
                       and t["interval_pct"][0] <= c["interval_pct"][1])
            print(f"  {key[1]:22} quick {c['change_pct']:+.1f} % [{c['interval_pct'][0]:+.1f}, "
                  f"{c['interval_pct'][1]:+.1f}] {c['verdict']}; in turns "
                  f"{t['change_pct']:+.1f} % [{t['interval_pct'][0]:+.1f}, "
                  f"{t['interval_pct'][1]:+.1f}] {t['verdict']}; "
                  f"{'overlap' if overlap else 'NO OVERLAP'}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.dedent(__doc__.split("\n\n", 1)[1]),
    )
    parser.add_argument("part", choices=["quick", "truth", "waiting", "aa", "planted", "report"])
    parser.add_argument("--out", type=Path, required=True, help="results and figures go here")
    parser.add_argument("--times", type=int, default=5)
    parser.add_argument("--budget", default="15m")
    parser.add_argument("--percent", default="5")
    parser.add_argument("--switch", action="store_true",
                        help="quick, aa, planted: switched passes (servelab --switch)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part == "quick":
        quick(args.out, args.times, args.switch)
    elif args.part == "truth":
        truth(args.out, args.budget)
    elif args.part == "waiting":
        waiting(args.out)
    elif args.part == "aa":
        aa(args.out, args.times, args.switch)
    elif args.part == "planted":
        planted(args.out, [float(p) for p in args.percent.split(",")], args.times, args.switch)
    report(args.out)


if __name__ == "__main__":
    main()
