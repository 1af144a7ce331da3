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

from support import simulated_study

NOISE = {"low (1 % / 2 %)": (0.01, 0.02), "medium (2 % / 3 %)": (0.02, 0.03),
         "high (3 % / 5 %)": (0.03, 0.05)}
TRUTHS = {"A/A": {}, "keepalive +5 %": {"keepalive": math.log(1.05)},
          "keepalive +10 %": {"keepalive": math.log(1.10)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--budget", type=float, default=160.0)
    parser.add_argument("--drift", type=float, default=0.08)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--in-turns", action="store_true",
                        help="quick's in-turns shape (2 s runs in 1 s slices), as on 2 CPUs")
    parser.add_argument("--truth", choices=list(TRUTHS), action="append",
                        help="only these truths (repeatable; default: all)")
    args = parser.parse_args()
    truths = {name: TRUTHS[name] for name in args.truth or TRUTHS}
    shape = "in turns" if args.in_turns else "side by side"
    print(f"{args.studies} simulated studies per row; quick's shape {shape}, "
          f"budget {args.budget:g} s")
    print("| noise (start / slice) | truth | coverage | family-wise false, Holm | "
          "without Holm | found (keepalive) | rounds (mean) |")
    print("|---|---|---|---|---|---|---|")
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
