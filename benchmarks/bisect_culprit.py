"""Issue "Continuous benchmarking": does `servelab bisect` find the culprit, how long does
it take, and how many measurements does it spend against plain bisection? Prints figures;
asserts nothing.

    .venv/bin/python benchmarks/bisect_culprit.py [--commits 40] [--culprit 23] [--extra 0.10]
        [--searches 3] [--none 1] [--budget 90] [--retries 1] [--fail-if THRESHOLD]
        [--random-culprit SEED] [--share S] [--out DIR]
    .venv/bin/python benchmarks/bisect_culprit.py --report --out DIR

With --out, each search's line is kept in DIR/searches.jsonl as soon as it ends, so that
the issue's 20 + 20 searches (10-20 minutes each here) can be gathered over several
sittings into one file; --report sums them up: how often the culprit was found (and
"no change" said), the wall time and the starts per search against plain bisection.

A generated git repository of a small WSGI app (every request hashes ROUNDS times), one
commit per version; from commit --culprit on, the request costs --extra more CPU (0.10:
+10 % CPU per request of the stack: the hashing's rounds grow by --extra over its share
of the request's CPU, calibrated first, see ``hashing_share``). Each search is `servelab
bisect --fail-if "rps_per_cpu < -5%"` (--fail-if; requests per CPU second: what +10 % CPU
per request moves by -9 %, where requests/s moved by -4 to -9 % here, a stack that leaves
its CPU idle a tenth of the time) from the first commit to the last (each step a check of one
commit against the first, in temporary worktrees); --none searches run on a repository
whose commits are all alike. Printed per search: the answer, its steps and their
decisions, the checks' starts (fresh starts of each version, the measurements), the wall
time; and what plain bisection with 5 starts per step would have spent: (1 +
ceil(log2(commits))) x 5 x 2 starts.

Each search holds /tmp/servelab-cpu.lock (flock) while it runs.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOCK = "/tmp/servelab-cpu.lock"
# The servelab measured: the commit of this checkout (searches of other designs are told
# apart in searches.jsonl).
COMMIT = subprocess.run(
    ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
    capture_output=True, text=True, check=False,
).stdout.strip()
BASE_ROUNDS = 4000
APP = """
import hashlib

ROUNDS = {rounds}  # version {number}


def app(environ, start_response):
    digest = b"servelab"
    for _ in range(ROUNDS):
        digest = hashlib.sha256(digest).digest()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [digest.hex().encode()]
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.org", *args],
        check=True, capture_output=True, text=True,
    ).stdout.strip()


def hashing_share(work: Path) -> float:
    """The app's hashing's share of the stack's CPU per request (the rest is nginx,
    gunicorn and HTTP: about a fifth here), so that a culprit adds --extra of the whole
    request's CPU, not of the hashing alone (+10 % of the hashing moved requests/s by
    about -6 %, barely past a -5 % threshold). Measured as `servelab check` measures: the
    base app against the same app hashing twice as much (in turns, so both see the
    same machine speed; timing the hashing alone a minute apart from the stack read shares
    of 0.65 and 0.86), each start's CPU per request over its measured windows; the share
    is (twice) / (base) - 1, the medians'. 90 s: at 30 s two calibrations read 0.71 and
    0.90. (Against no hashing at all the share read
    0.77-0.81, and the culprit it made moved requests per CPU second by -7.6 % in four
    checks, not -9.1 %: a stack serving 1,500 requests/s spends less on each.)"""
    results = work / "calibrate" / "results"
    for name, rounds in (("base", BASE_ROUNDS), ("twice", 2 * BASE_ROUNDS)):
        (work / "calibrate" / name).mkdir(parents=True)
        (work / "calibrate" / name / "shop.py").write_text(APP.format(rounds=rounds, number=0))
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(
            [sys.executable, "-m", "servelab", "check", "--app", "shop:app", "--app-dir",
             str(work / "calibrate" / "twice"), "--baseline-dir",
             str(work / "calibrate" / "base"), "--budget", "90", "--inconclusive", "pass",
             "--results", str(results)],
            capture_output=True, text=True, timeout=600, check=False,
        )
    runs = [json.loads(line) for path in results.glob("*-check/runs.jsonl")
            for line in path.read_text().splitlines()]
    per_request = {
        variant: statistics.median(
            sum(p["cpu_s"] for p in run["processes"]) / run["load"]["requests_total"]
            for run in runs if run["variant"] == variant
        )
        for variant in ("baseline", "candidate")
    }
    share = per_request["candidate"] / per_request["baseline"] - 1
    print(f"calibrated: the stack's CPU per request {1e3 * per_request['baseline']:.2f} ms, "
          f"{1e3 * per_request['candidate']:.2f} ms hashing twice as much: the hashing's "
          f"share {share:.2f}", flush=True)
    return share


def add_share_option(parser: argparse.ArgumentParser) -> None:
    """--share: a share measured before, instead of calibrating on every run."""
    parser.add_argument("--share", type=float, default=None,
                        help="the hashing's share of the stack's CPU per request, as measured "
                        "before (default: calibrate it first, 90 s)")


def rounds_for(factor: float, share: float) -> int:
    """The hashing rounds that make the request's whole CPU ``factor`` times the base
    app's, when the hashing is ``share`` of it."""
    return round(BASE_ROUNDS * (1 + (factor - 1) / share))


def repository(
    root: Path, commits: int, culprit: int | None, extra: float, share: float = 1.0
) -> list[str]:
    (root / "web").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for number in range(commits):
        slower = culprit is not None and number >= culprit
        rounds = rounds_for(1 + extra, share) if slower else BASE_ROUNDS
        (root / "web" / "shop.py").write_text(APP.format(rounds=rounds, number=number))
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", f"version {number}")
    return git(root, "rev-list", "--reverse", "HEAD").split()


def search(
    repo: Path, commits: list[str], budget: float, retries: int, fail_if: str, work: Path
) -> dict:
    out = work / f"bisect-{time.monotonic_ns()}.json"
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "servelab", "bisect", "--app", "shop:app",
             "--app-dir", str(repo / "web"), "--good", commits[0], "--bad", "main",
             "--fail-if", fail_if, "--budget", str(budget), "--retries", str(retries),
             "--json", str(out),
             "--results", str(work / "results")],
            capture_output=True, text=True, timeout=7200, check=False,
        )
        wall = time.monotonic() - began
    if not out.is_file():
        print(done.stderr[-2000:])
        return {"ending": "error", "steps": [], "wall": wall}
    answer = json.loads(out.read_text())
    answer["wall"] = wall
    return answer


def keep(out: Path | None, line: dict) -> None:
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "searches.jsonl", "a") as file:
            file.write(json.dumps(line) + "\n")


def report(out: Path) -> None:
    path = out / "searches.jsonl"
    lines = [json.loads(text) for text in path.read_text().splitlines()] if path.is_file() else []
    if not lines:
        print(f"no searches kept in {path}")
        return
    def design(line: dict) -> tuple:
        return (line.get("commit", "?"), line["budget"], line.get("retries", 1),
                line.get("fail_if", "rps < -5%"))

    for commit, budget, retries, fail_if in dict.fromkeys(map(design, lines)):
        print(f"servelab {commit}, --budget {budget:g} --retries {retries} "
              f"--fail-if {fail_if!r}:")
        for label in ("culprit", "none"):
            mine = [line for line in lines if line["label"] == label
                    and design(line) == (commit, budget, retries, fail_if)]
            if not mine:
                continue
            walls = sorted(line["wall"] for line in mine)
            starts = sorted(line["starts"] for line in mine)
            what = "found the culprit" if label == "culprit" else 'said "no change"'
            print(f"  {label}: {what} in {sum(line['right'] for line in mine)} of {len(mine)}; "
                  f"wall median {statistics.median(walls):.0f} s "
                  f"({walls[0]:.0f}-{walls[-1]:.0f}); starts median "
                  f"{statistics.median(starts):g} ({starts[0]}-{starts[-1]}) against plain "
                  f"bisection x5: {mine[-1]['plain']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--culprit", type=int, default=23)
    parser.add_argument("--extra", type=float, default=0.10)
    parser.add_argument("--random-culprit", type=int, metavar="SEED", default=None,
                        help="each culprit search on a new repository, its culprit at a "
                        "commit drawn at random (seeded): a deterministic gate (--fail-if "
                        "instructions) would walk one repository's path alike every time")
    parser.add_argument("--searches", type=int, default=3)
    parser.add_argument("--none", type=int, default=1)
    parser.add_argument("--budget", type=float, default=90.0)
    add_share_option(parser)
    parser.add_argument("--fail-if", default="rps_per_cpu < -5%",
                        help="what counts as slower (servelab bisect --fail-if)")
    parser.add_argument("--retries", type=int, default=1,
                        help="more measuring for an unknown step (servelab bisect --retries)")
    parser.add_argument("--out", type=Path, help="keep each search's line in OUT/searches.jsonl")
    parser.add_argument("--report", action="store_true", help="sum up the searches kept in --out")
    args = parser.parse_args()
    if args.report:
        if args.out is None:
            parser.error("--report needs --out DIR")
        report(args.out)
        return
    plain = (1 + math.ceil(math.log2(args.commits))) * 5 * 2
    work = Path(tempfile.mkdtemp(prefix="servelab-bisect-bench-"))
    # Counted instructions are the app's own, almost all of them the hashing: a culprit's
    # extra rounds are its extra instructions (share 1), with no calibration.
    counted = args.fail_if.strip().startswith("instructions")
    share = args.share or (hashing_share(work) if args.searches and not counted else 1.0)
    draw = random.Random(args.random_culprit)
    for label, planted, n in (("culprit", args.culprit, args.searches), ("none", None, args.none)):
        culprit = planted
        repo = work / f"repo-{label}"
        commits = repository(repo, args.commits, culprit, args.extra, share)
        for k in range(n):
            if planted is not None and args.random_culprit is not None:
                # A new repository per search, its culprit anywhere after the good end.
                culprit = draw.randrange(1, args.commits)
                repo = work / f"repo-{label}-{k}"
                commits = repository(repo, args.commits, culprit, args.extra, share)
            answer = search(repo, commits, args.budget, args.retries, args.fail_if, work)
            steps = answer.get("steps", [])
            right = (
                answer.get("first_bad") == commits[culprit] if culprit is not None
                else answer.get("ending") == "no change"
            )
            # A step's starts are each version's; on instruction counts the good commit is
            # counted at the first step only (bisect keeps its count: it does not move).
            measured = sum(s.get("starts", 0) for s in steps)
            starts = measured + (steps[0].get("starts", 0) if counted and steps else measured)
            keep(args.out, {
                "label": label, "right": right, "ending": answer.get("ending"),
                "steps": [s["decision"] for s in steps], "starts": starts,
                "wall": answer["wall"], "plain": plain, "commits": args.commits,
                "extra": args.extra, "share": share, "budget": args.budget, "culprit": culprit,
                "fail_if": args.fail_if,
                "retries": args.retries,
                "commit": COMMIT,
                "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            })
            print(f"{label} search {k + 1}: {answer.get('ending')} "
                  f"{'right' if right else 'WRONG'}; {len(steps)} steps "
                  f"({', '.join(s['decision'] for s in steps)}); {starts} starts; "
                  f"{answer['wall']:.0f} s; plain bisection x5: {plain} starts", flush=True)
    shutil.rmtree(work)  # the figures are the lines printed (and kept with --out)


if __name__ == "__main__":
    sys.exit(main())
