"""Issue "Conclusive answers": how clear is the quick study's answer on this machine?
Prints figures; asserts nothing.

    .venv/bin/python benchmarks/conclusive.py quick [--times 5] [-- extra study options]
    .venv/bin/python benchmarks/conclusive.py aa [--times 10]
    .venv/bin/python benchmarks/conclusive.py sensitivity [--percent 5,10]

- quick: ``servelab study quick`` with its defaults, N times, as a user runs it (a
  subprocess, timed): wall time, every requests/s comparison's change, 95 % interval,
  half-width and verdict, and whether it is clear. Extra options after ``--`` go to
  the study (e.g. ``-- --slices 1`` for runs in turns).
- aa: the quick study with one variant identical to the baseline, N times: how many
  of the comparisons (four endpoints each) get "better" or "worse".
- sensitivity: the quick study's design on the two small endpoints, the variant's app
  spinning N % more CPU per request (SERVELAB_EXTRA_WORK_US, sized per endpoint
  from the baseline's measured app CPU per request in a first A/A run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from servelab.analysis.analyze import analyze, comparisons_document
from servelab.config.experiment import Experiment
from servelab.host.cpus import default_cpu_plan
from servelab.session import ExperimentSession
from servelab.studies import StudyOptions, get_study

SERVELAB = str(Path(sys.executable).with_name("servelab"))


def comparison_lines(document: dict[str, Any], metric: str | None = None) -> list[str]:
    """One line per comparison of ``metric`` (default: the answer's)."""
    metric = metric or document["answer_metric"]
    lines = [f"  {metric}:"]
    for c in document["comparisons"]:
        if c["metric"] != metric:
            continue
        low, high = c["interval_pct"] or (float("nan"), float("nan"))
        lines.append(
            f"    {c['workload']:12} {c['variant']:22} {c['change_pct']:+6.1f} % "
            f"[{low:+6.1f}, {high:+6.1f}] ±{c['half_width_pct'] or float('nan'):4.1f} "
            f"{c['verdict']:26} {'clear' if c['clear'] else 'NOT CLEAR'}  "
            f"({c['restarts'][1]} starts, {c['passes']} passes)"
        )
    return lines


def quick(times: int, extra: list[str], root: Path) -> None:
    for n in range(1, times + 1):
        began = time.monotonic()
        done = subprocess.run(
            [SERVELAB, "study", "quick", "--results", str(root), *extra],
            capture_output=True,
            text=True,
        )
        wall = time.monotonic() - began
        if done.returncode != 0:
            print(f"run {n}: exit {done.returncode}\n{done.stderr[-2000:]}")
            continue
        result_id = next(
            line.split("#")[1].split()[0]
            for line in done.stdout.splitlines()
            if line.startswith("result #")
        )
        ids = json.loads(
            subprocess.run(
                [SERVELAB, "results", "show", "--results", str(root), "--json", result_id],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        answer = ids["answer_metric"]
        clear = sum(c["clear"] for c in ids["comparisons"] if c["metric"] == answer)
        print(f"run {n}: {wall:.0f} s wall, {clear} of 8 {answer} comparisons clear")
        for line in comparison_lines(ids) + comparison_lines(ids, "rps"):
            print(line)
        stopped = [line for line in done.stdout.splitlines() if "measuring stopped" in line]
        print("    " + (stopped[0] if stopped else "(no stopping line)"))


def measure(experiment: Experiment, root: Path) -> list:
    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115 - lives as long as the run
    session = ExperimentSession(
        experiment, default_cpu_plan(), root, console=quiet, out=quiet
    )
    store = session.run()
    return store.runs()


def a_a(times: int, root: Path) -> None:
    calls = 0
    for n in range(1, times + 1):
        experiment = identical_variant(get_study("quick").build(StudyOptions()))
        began = time.monotonic()
        runs = measure(experiment, root)
        document = comparisons_document(analyze(experiment, runs))
        rps = [c for c in document["comparisons"] if c["metric"] == document["answer_metric"]]
        wrong = [c for c in rps if c["verdict"] in ("better", "worse")]
        calls += len(wrong)
        print(
            f"A/A {n}: {time.monotonic() - began:.0f} s, {len(wrong)} of {len(rps)} called "
            "better/worse"
        )
        for line in comparison_lines(document):
            print(line)
    print(f"A/A total: {calls} of {4 * times} comparisons called better/worse")


def identical_variant(experiment: Experiment) -> Experiment:
    again = experiment.baseline.model_copy(update={"name": "A-again"})
    return experiment.model_copy(update={"name": "a-a", "variants": (again,)})


def sensitivity(percents: list[float], root: Path) -> None:
    base = get_study("quick").build(StudyOptions(endpoints=("sync-small", "async-small")))
    aa = identical_variant(base)
    aa_runs = measure(aa, root)
    for workload in base.workloads:
        mine = [r for r in aa_runs if r.workload == workload.name]
        app_us = 1e6 * sum(
            sum(p.cpu_s for p in r.processes if p.role == "app") for r in mine
        ) / sum(r.load.requests_total for r in mine)
        for pct in percents:
            extra_us = round(pct / 100 * app_us)
            slow = base.baseline.model_copy(
                update={
                    "name": f"{pct:g}%-more-work",
                    "app": base.baseline.app.model_copy(
                        update={"env": {"SERVELAB_EXTRA_WORK_US": str(extra_us)}}
                    ),
                }
            )
            experiment = base.model_copy(
                update={
                    "name": "sensitivity",
                    "variants": (slow,),
                    "workloads": (workload,),
                }
            )
            began = time.monotonic()
            runs = measure(experiment, root)
            document = comparisons_document(analyze(experiment, runs))
            print(
                f"{workload.name}: app CPU {app_us:.0f} µs/request, +{pct:g} % = "
                f"{extra_us} µs spun; {time.monotonic() - began:.0f} s"
            )
            for line in comparison_lines(document):
                print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["quick", "aa", "sensitivity"])
    parser.add_argument("--times", type=int, default=None)
    parser.add_argument("--percent", default="5,10")
    parser.add_argument("--out", type=Path, default=None, help="keep the results here")
    args, extra = parser.parse_known_args()  # the rest (after --) goes to the quick study
    args.extra = [x for x in extra if x != "--"]
    with contextlib.ExitStack() as cleanup:
        root = args.out or Path(
            cleanup.enter_context(tempfile.TemporaryDirectory(prefix="servelab-conclusive-"))
        )
        if args.what == "quick":
            quick(args.times or 5, args.extra, root)
        elif args.what == "aa":
            a_a(args.times or 10, root)
        else:
            sensitivity([float(p) for p in args.percent.split(",")], root)


if __name__ == "__main__":
    main()
