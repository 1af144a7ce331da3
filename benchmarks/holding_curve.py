"""Issue "Capacity of a stack that runs out of CPU": on a real stack, do the holding
curve's intervals (`servelab capacity`'s default search) hold the rate held in 90 % and
in 50 % of trials, how wide are they, how long does a search take, and how far does the
truth move within the hour? Prints figures; asserts nothing.

    .venv/bin/python benchmarks/holding_curve.py --stack sleepy|fastapi [--searches 10]
        [--sweep-passes 5] [--sweep-rates 12] [--out DIR]
    .venv/bin/python benchmarks/holding_curve.py --stack app --app app:app \
        --app-dir DIR --python DIR/.venv/bin/python --path '/data/items.json'
    .venv/bin/python benchmarks/holding_curve.py --stack sleepy --replay LOG

    .venv/bin/python benchmarks/holding_curve.py --stack fastapi --from-results DIR
        [--refit]

--from-results: the same summary from the --out directory of a run stopped early (its
searches' wall times then from their trials' own times). --refit: each search's
intervals fitted again to its trials by this code, not read from its answer (to compare
a change of the fit on the same trials). With --replay LOG the headroom
is searched (`capacity --replay`): the rates are speeds,
times the log's traffic.

1. A first search places the sweep: --sweep-rates rates evenly spaced in log from 0.8 x
   its 90 % point to 1.2 x its 50 % point.
2. The truth: --sweep-passes passes over those rates, each pass in a shuffled order, each
   trial on a fresh start (capacity's default); the holding curve fitted to all the
   sweep's trials (servelab.capacity.curve.fit_curve), its 90 % and 50 % points.
3. --searches searches, spread between the sweep's passes so that they and the truth meet
   the same hours of a machine whose speed drifts: how often each point's 90 % interval
   holds the truth's, the half-widths, the trials, the wall time (from taking the lock).
   Three truths: the whole sweep's curve; the curve of its trials near the edge (a line
   through a whole sweep lies under a sharp edge); and the truth of the search's own time,
   the two passes around it (this VM's speed moves in spells of minutes, and a search
   meets one: docs/capacity-estimand.md).
4. The drift: the curve fitted to the first half of the passes against the last half,
   and how each search's estimate moved with the machine's speed during it.

Stacks (stack on CPU 0, driver on CPU 1, servelab's default plan; each measurement holds
/tmp/servelab-cpu.lock): "sleepy" (10 ms a request, gunicorn sync x2, nginx, unix socket:
a sharp edge); "fastapi" (the seed's app on uvicorn x2, POST /async/items/: out of CPU);
"app": the user's own app as `servelab capacity --app` runs it (e.g. a third-party app in
its own virtualenv). SLO p99 < 100 ms, errors < 0.1 %.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from capacity import LOCK, SLO, FixedRates, measure_search

from servelab.capacity import CapacityPlan
from servelab.capacity.curve import HoldingCurve, SharePoint, fit_curve
from servelab.capacity.search import Outcome
from servelab.capacity.trials import Trial
from servelab.config.load import ReplaySpec
from servelab.config.run import UserApp, UserRequest
from servelab.config.stack import AppSpec

LOCAL = 1.1  # the local truth's window: the sweep's rates within this factor of its edge


@dataclass(frozen=True)
class SearchRecord:
    curve: HoldingCurve | None
    trials: int
    seconds: float
    after_pass: int  # the sweep pass it followed (0-based): its time-local truth's passes
    speed: float | None  # the machine's own speed (units/s) before its trials, their mean


def _speed(trials: list[Trial]) -> float | None:
    speeds = [t.cpu_speed for t in trials if t.cpu_speed is not None]
    return statistics.fmean(speeds) if speeds else None


def _sweep_rates(first: HoldingCurve | None, estimate: float, count: int) -> list[float]:
    low = 0.8 * (first.hold.rate if first else estimate)
    high = 1.2 * (first.half.rate if first else estimate)
    if first is not None and first.half.rate / first.hold.rate < 1.1:
        low, high = 0.85 * first.hold.rate, 1.15 * first.half.rate  # a sharp edge
    step = math.log(high / low) / (count - 1)
    return [round(low * math.exp(i * step), 1) for i in range(count)]


def _covers(point: SharePoint | None, truth: float) -> bool:
    return bool(point and point.interval and point.interval[0] <= truth <= point.interval[1])


def _range(values: list[float], fmt: str = "{:.1f}") -> str:
    if not values:
        return "none"
    return (f"median {fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))}, {fmt.format(max(values))}]")


def _point(name: str, point: SharePoint) -> str:
    interval = "unbounded" if point.interval is None else (
        f"[{point.interval[0]:,.4g}, {point.interval[1]:,.4g}]")
    return f"{name} {point.rate:,.4g} {interval}"


def _curve_line(curve: HoldingCurve | None) -> str:
    if curve is None:
        return "no curve"
    return (f"{_point('90 %', curve.hold)}, {_point('50 %', curve.half)}, band x"
            f"{curve.ratio:.3f}{' (steep)' if curve.steep else ''}, {curve.fitted} trials")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", choices=["sleepy", "fastapi", "app"], required=True)
    parser.add_argument("--app", help="--stack app: the app's import path")
    parser.add_argument("--app-dir", type=Path)
    parser.add_argument("--python", type=Path, help="the app's interpreter")
    parser.add_argument("--path", default="/", help="--stack app: the request's path")
    parser.add_argument("--replay", type=Path, help="an access log: search its speed")
    parser.add_argument("--searches", type=int, default=10)
    parser.add_argument("--sweep-passes", type=int, default=5)
    parser.add_argument("--sweep-rates", type=int, default=12)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--from-results", type=Path, metavar="DIR",
                        help="summarise a run stopped early from its --out directory")
    parser.add_argument("--refit", action="store_true",
                        help="--from-results: fit each search's trials again")
    args = parser.parse_args()
    if args.from_results:
        from_results(args.from_results, refit=args.refit)
        return
    if args.stack == "app" and not args.app:
        parser.error("--stack app needs --app")
    user = UserApp()
    if args.stack == "app":
        user = UserApp(app=AppSpec(ref=args.app, app_dir=args.app_dir, python=args.python),
                       request=UserRequest(path=args.path))
    if args.replay:
        user = replace(user, replay=ReplaySpec(log=(str(args.replay),)))
    stack = "sleepy" if args.stack == "app" else args.stack  # the app replaces sleepy's
    out = args.out or Path(tempfile.mkdtemp(prefix="holding-curve-"))
    began = time.monotonic()
    print(f"stack {args.stack} {args.app or ''} {args.replay or ''}, SLO {SLO}; "
          f"lock {LOCK}; results under {out}")

    def search() -> tuple[object, float]:
        return measure_search(stack, out, user=user)

    first, seconds = search()
    print(f"first search: {_curve_line(first.curve)}; {len(first.trials)} trials, "
          f"{seconds:.0f} s", flush=True)
    rates = _sweep_rates(first.curve, first.estimate.rate, args.sweep_rates)
    print("sweep rates: " + ", ".join(f"{r:g}" for r in rates))
    passes: list[list[Outcome]] = []
    searches: list[SearchRecord] = []
    for k in range(args.sweep_passes):
        order = rates[:]
        random.Random(k).shuffle(order)
        answer, seconds = measure_search(
            stack, out, user=user, plan=CapacityPlan(slo=SLO, max_trials=200),
            make_search=lambda s, order=order: FixedRates(s, order),
        )
        passes.append([t.outcome(SLO) for t in answer.trials if t.trusted])
        held = sum(o.held for o in passes[-1])
        print(f"sweep pass {k + 1}/{args.sweep_passes}: {len(answer.trials)} trials, "
              f"held {held}, {seconds:.0f} s", flush=True)
        gaps = max(1, args.sweep_passes - 1)  # searches between passes, none after the last
        share, extra = divmod(args.searches, gaps)
        for _ in range(share + (k < extra) if k < gaps else 0):
            answer, seconds = search()
            searches.append(SearchRecord(answer.curve, len(answer.trials), seconds, k,
                                         _speed(list(answer.trials))))
            print(f"  search {len(searches)}: {_curve_line(answer.curve)}; "
                  f"{len(answer.trials)} trials, {seconds:.0f} s", flush=True)
    summarise(rates, passes, searches)
    print(f"benchmark wall {time.monotonic() - began:.0f} s")


def summarise(
    rates: list[float], passes: list[list[Outcome]], searches: list[SearchRecord]
) -> None:
    """The truth from the sweep's passes, its drift, and the searches against it."""
    every = [o for p in passes for o in p]
    truth = fit_curve(every)
    print(f"truth (the sweep, {len(every)} trials): {_curve_line(truth)}")
    for rate in rates:
        at = [o for o in every if o.rate == rate]
        print(f"  {rate:g} req/s: held {sum(o.held for o in at)} of {len(at)}, log margins "
              + " ".join("err" if o.errors_broke else f"{math.log(o.margin):+.2f}" for o in at))
    if len(passes) >= 2:  # the first half of the passes against the last half
        k = len(passes) // 2
        early = fit_curve([o for p in passes[:k] for o in p])
        late = fit_curve([o for p in passes[-k:] for o in p])
        print(f"drift: passes 1-{k} {_curve_line(early)}")
        print(f"       passes {len(passes) - k + 1}-{len(passes)} {_curve_line(late)}")
        if early and late:
            print(f"       the 90 % point moved {late.hold.rate / early.hold.rate - 1:+.1%}, "
                  f"the 50 % point {late.half.rate / early.half.rate - 1:+.1%}")
    if truth is None:
        print("no truth: the sweep's trials did not give a curve")
        return
    # The curve is a straight line in log margin against log rate; where the stack's edge
    # is sharp the margins bend (far below it they grow slowly), and a line through the
    # whole sweep lies under the edge. The searches fit their trials near the edge: the
    # local truth is the sweep's trials within LOCAL of the whole sweep's 50 % point.
    local = fit_curve([o for o in every if abs(math.log(o.rate / truth.half.rate))
                       <= math.log(LOCAL)])
    print(f"local truth (sweep trials within x{LOCAL:g} of its 50 % point): "
          f"{_curve_line(local)}")
    _coverage(searches, [truth] * len(searches), "the whole sweep's truth")
    if local is not None:
        _coverage(searches, [local] * len(searches), "the local truth")
    # The truth of the search's own time: the sweep passes just before and after it (the
    # machine's speed moves in spells of minutes; a search sees its own spell).
    timely = [fit_curve([o for p in passes[s.after_pass:s.after_pass + 2] for o in p])
              for s in searches]
    if all(t is not None for t in timely):
        _coverage(searches, timely, "the truth of its own time (the passes around it)")
    _speeds(searches)


def _speeds(searches: list[SearchRecord]) -> None:
    """How each search's estimate moved with the machine's speed during it."""
    pairs = [(s.speed, s.curve.hold.rate) for s in searches if s.speed and s.curve]
    if len(pairs) < 3:
        return
    speeds, rates = zip(*pairs, strict=True)
    r = statistics.correlation(speeds, rates)
    print(f"machine speed during the searches {_range(list(speeds), '{:,.0f}')} units/s; "
          f"correlation with the 90 % estimate {r:+.2f} over {len(pairs)} searches")


def _coverage(
    searches: list[SearchRecord], truths: list[HoldingCurve | None], label: str
) -> None:
    """How often each search's intervals hold its truth (one per search)."""
    print(f"against {label}:")
    curves = [s.curve for s in searches]
    for name, share in (("90 %", "hold"), ("50 %", "half")):
        points = [getattr(c, share) if c else None for c in curves]
        true = [getattr(t, share).rate if t else math.nan for t in truths]
        with_interval = [p for p in points if p and p.interval]
        held = sum(_covers(p, t) for p, t in zip(points, true, strict=True))
        known = [t for t in true if not math.isnan(t)]
        print(f"  {name} point: truth " + _range(known, "{:,.4g}") + "; an interval in "
              f"{len(with_interval)} of {len(searches)}, holding the truth in {held} of "
              f"{len(searches)}; estimates " + _range([p.rate for p in points if p], "{:,.4g}")
              + "; half-width % " + _range([100 * p.relative_half_width for p in with_interval]))
    print(f"  steep said in {sum(bool(c and c.steep) for c in curves)} of {len(searches)}; "
          f"trials {_range([s.trials for s in searches], '{:.0f}')}; wall s "
          + _range([s.seconds for s in searches], "{:.0f}"))



def _read(directory: Path) -> tuple[list[Trial], dict]:
    trials = [Trial.from_dict(json.loads(line))
              for line in (directory / "trials.jsonl").read_text().splitlines()]
    [variant] = json.loads((directory / "capacity.json").read_text())["variants"]
    return trials, variant


def _curve_of(document: dict | None, trials: list[Trial]) -> HoldingCurve | None:
    if document is None:
        return None

    def point(d: dict) -> SharePoint:
        return SharePoint(d["share"], d["rate"], tuple(d["interval"]) if d["interval"] else None)

    band = document["band_interval"]
    return HoldingCurve(
        document["a"], document["b"], document["s"], document["confidence"],
        point(document["hold"]), point(document["half"]), tuple(band) if band else None,
        document["steep"], document["trials_fitted"],
        (min(t.rate for t in trials), max(t.rate for t in trials)),
    )


def from_results(out: Path, refit: bool = False) -> None:
    """The summary of a run from its directories (in the order made): the first search,
    then sweep passes (every trial at one of the sweep's rates) and searches. A search's
    wall time here is from its first trial's start to its last trial's end."""
    directories = sorted(d for d in out.iterdir() if (d / "capacity.json").is_file())
    sweep = {t.rate for t in _read(directories[1])[0]}
    rates = sorted(sweep)
    passes: list[list[Outcome]] = []
    searches: list[SearchRecord] = []
    for directory in directories[1:]:
        trials, variant = _read(directory)
        if {t.rate for t in trials} == sweep and len(trials) == len(sweep):
            passes.append([t.outcome(SLO) for t in trials if t.trusted])
            continue
        began = datetime.fromisoformat(trials[0].started)
        ended = datetime.fromisoformat(trials[-1].started) + timedelta(seconds=trials[-1].seconds)
        curve = (fit_curve([t.outcome(SLO) for t in trials if t.trusted]) if refit
                 else _curve_of(variant["holding_curve"], trials))
        searches.append(SearchRecord(curve, len(trials), (ended - began).total_seconds(),
                                     len(passes) - 1, _speed(trials)))
    print(f"from {out}: {len(passes)} sweep passes, {len(searches)} searches (the first "
          f"search, {directories[0].name}, placed the sweep)")
    summarise(rates, passes, searches)


if __name__ == "__main__":
    main()
