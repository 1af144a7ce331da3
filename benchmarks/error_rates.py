"""Error rates of servelab's measuring rule at the moment it stops, on simulated studies.

The real Runner, stopping rule (PrecisionRule), nested comparisons and Holm's
family-wise judgement, driven by the tests' FakeExecutor: stacks with a start-to-start
spread and a slice spread, on a machine whose speed drifts from moment to moment. The
study has quick's shape (a baseline and two variants side by side, four workloads,
±5 % precision, a 160 s budget at 3 s a pass). Prints, per noise level and truth:
coverage of the 95 % intervals at the stopping time, the share of studies calling any
identical variant different (family-wise) with and without Holm, how often a real
difference is found, and the rounds measured.

    .venv/bin/python benchmarks/error_rates.py --studies 400

``--check``: `servelab check`'s decisions instead (its own experiment, default
thresholds and 3-minute budget): how often identical versions are held and a version
10 % slower is crossed, at each noise level and at this VM's in turns (starts 0 %,
windows 12 % beside a drift of 8 %: docs/statistics.md "Where the spread comes from").

No machine time: pure simulation (about 0.2 s a study).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import lognormal_level, simulated_check, simulated_study

NOISE = {"low (1 % / 2 %)": (0.01, 0.02), "medium (2 % / 3 %)": (0.02, 0.03),
         "high (3 % / 5 %)": (0.03, 0.05)}
TRUTHS = {"A/A": {}, "keepalive +5 %": {"keepalive": math.log(1.05)},
          "keepalive +10 %": {"keepalive": math.log(1.10)}}
CHECK_NOISE = {**NOISE, "this VM (0 % / 12 %)": (0.0, 0.12)}
CHECK_TRUTHS = {"identical": 0.0, "10 % slower": math.log(0.90)}
# A real in-turns check measured 8 rounds of 2 x 3 windows in its 180 s (launches and
# warm-ups included): about 3.7 s a window; side by side a window serves both versions.
CHECK_WINDOW_S = {True: 2.0, False: 3.7}


def table_head(*columns: str) -> None:
    """A markdown table's header row and rule."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))


def check_decisions(args: argparse.Namespace) -> None:
    """Decisions of the check's rule at each noise level: held, crossed, inconclusive."""
    from servelab.analysis.thresholds import overall
    from servelab.check import CANDIDATE

    side_by_side = not args.in_turns
    print(f"{args.studies} simulated checks per row; "
          f"{'side by side' if side_by_side else 'in turns'}, budget {args.budget:g} s, "
          f"{CHECK_WINDOW_S[side_by_side]:g} s a window")
    table_head("noise (start / slice)", "truth", "held", "crossed", "inconclusive",
               "starts (mean)", "seconds (median)")
    for noise, (sd_start, sd_slice) in CHECK_NOISE.items():
        for truth, effect in CHECK_TRUTHS.items():
            rng = random.Random(args.seed)
            states, starts, seconds = [], [], []
            for _ in range(args.studies):
                level = lognormal_level(rng, {CANDIDATE: effect}, sd_start=sd_start,
                                        sd_slice=sd_slice, drift=args.drift)
                judgements, each, _, took = simulated_check(
                    level, budget_s=args.budget, side_by_side=side_by_side,
                    seconds_per_window=CHECK_WINDOW_S[side_by_side],
                )
                states.append(overall(judgements))
                starts.append(each)
                seconds.append(took)
            share = {state: 100 * states.count(state) / len(states)
                     for state in ("held", "crossed", "inconclusive")}
            print(f"| {noise} | {truth} | {share['held']:.0f} % | {share['crossed']:.0f} % | "
                  f"{share['inconclusive']:.0f} % | {statistics.fmean(starts):.1f} | "
                  f"{statistics.median(seconds):.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds of measuring (default: quick's 160, check's 180)")
    parser.add_argument("--drift", type=float, default=0.08)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--in-turns", action="store_true",
                        help="quick's in-turns shape (2 s runs in 1 s slices), as on 2 CPUs")
    parser.add_argument("--truth", choices=list(TRUTHS), action="append",
                        help="only these truths (repeatable; default: all)")
    parser.add_argument("--check", action="store_true",
                        help="servelab check's decisions (identical, 10 %% slower)")
    args = parser.parse_args()
    if args.check:
        args.budget = args.budget or 180.0
        check_decisions(args)
        return
    args.budget = args.budget or 160.0
    truths = {name: TRUTHS[name] for name in args.truth or TRUTHS}
    shape = "in turns" if args.in_turns else "side by side"
    print(f"{args.studies} simulated studies per row; quick's shape {shape}, "
          f"budget {args.budget:g} s")
    table_head("noise (start / slice)", "truth", "coverage", "family-wise false, Holm",
               "without Holm", "found (keepalive)", "rounds (mean)")
    for noise, (sd_start, sd_slice) in NOISE.items():
        for truth, effects in truths.items():
            rng = random.Random(args.seed)
            covered = compared = false = raw = found = real = 0
            rounds = []
            for _ in range(args.studies):
                false_here = raw_here = False
                for variant, c in simulated_study(
                    rng, effects, sd_start=sd_start, sd_slice=sd_slice, drift=args.drift,
                    budget_s=args.budget, side_by_side=not args.in_turns,
                ):
                    effect = effects.get(variant, 0.0)
                    low, high = c.interval_pct
                    compared += 1
                    covered += low <= 100 * math.expm1(effect) <= high
                    rounds.append(max(c.starts))
                    if effect == 0.0:
                        false_here |= c.verdict in ("better", "worse")
                        raw_here |= c.p_value is not None and c.p_value < 0.05
                    else:
                        real += 1
                        found += c.verdict == "better"
                false += false_here
                raw += raw_here
            n = args.studies
            share = f"{100 * found / real:.0f} %" if real else "—"
            print(f"| {noise} | {truth} | {100 * covered / compared:.1f} % | "
                  f"{100 * false / n:.1f} % | {100 * raw / n:.1f} % | {share} | "
                  f"{statistics.fmean(rounds):.1f} |", flush=True)


if __name__ == "__main__":
    main()
