"""Issue "Continuous benchmarking": does `servelab history` put its change points at the
commits that made steps of 5, 10 and 20 %, and none on the unchanged stretches? Prints
figures; asserts nothing.

    .venv/bin/python benchmarks/history_steps.py [--commits 40] [--steps 10:5,20:10,30:20]
        [--runs 1] [--budget 30] [--fail-if THRESHOLD] [--share S] [--out DIR]
    .venv/bin/python benchmarks/history_steps.py --report --out DIR

A generated git repository of the hashing app of bisect_culprit.py, one commit per version
(an hour apart); at each step's commit the request's CPU grows by the step's percent and
stays so (10:5 = from commit 10 on, 5 % more CPU per request of the stack; the hashing's
share of it calibrated first, as bisect_culprit.py does). A run checks every commit
against the one before it, as a gate on every push does (`servelab check --baseline-ref
PREVIOUS`, --budget seconds each, the commit in a temporary worktree), into one results
directory; so each commit is measured by two checks (its own and the next one's): the
reruns the noise band comes from. Then `servelab history` reads that directory; per
figure (requests/s, requests per CPU second) a step counts as found when a change point
lies within one commit of it, and every other change point is a false one. Also the
page's size, and its time to open in headless Chromium (servelab.report.browser).

With --out, each run's line is kept in DIR/runs.jsonl as soon as it ends (runs of about
30 minutes here gather over several sittings), and its checks' results in DIR/run-*/;
--report sums them up, per --fail-if. The rest of a run's temporary directory is removed.

Each run holds /tmp/servelab-cpu.lock (flock) while it measures.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bisect_culprit import APP, COMMIT, LOCK, add_share_option, git, hashing_share, rounds_for

from servelab.history.changes import DEFAULT_FALSE_ALARMS
from servelab.history.series import METRICS, build_series, read_points

HOUR = 3600
EPOCH = 1_790_000_000  # the first commit's time (2026); one commit an hour after it


def parse_steps(text: str) -> dict[int, float]:
    """"10:5,20:10" -> {10: 0.05, 20: 0.10}: the commit a step begins at, its size."""
    steps = {}
    for item in text.split(","):
        commit, _, percent = item.partition(":")
        steps[int(commit)] = float(percent) / 100
    return steps


def repository(root: Path, commits: int, steps: dict[int, float], share: float) -> list[str]:
    (root / "web").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    factor = 1.0
    for number in range(commits):
        factor *= 1 + steps.get(number, 0.0)
        (root / "web" / "shop.py").write_text(
            APP.format(rounds=rounds_for(factor, share), number=number)
        )
        stamp = f"@{EPOCH + number * HOUR} +0000"
        os.environ.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
        try:
            git(root, "add", ".")
            git(root, "commit", "-q", "-m", f"version {number}")
        finally:
            del os.environ["GIT_AUTHOR_DATE"], os.environ["GIT_COMMITTER_DATE"]
    return git(root, "rev-list", "--reverse", "HEAD").split()


def check_each(
    repo: Path, commits: list[str], budget: float, results: Path, fail_if: str
) -> float:
    """Every commit checked against the one before it; the seconds it took."""
    began = time.monotonic()
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for number in range(1, len(commits)):
            tree = repo.parent / f"tree-{number}"
            git(repo, "worktree", "add", "-q", "--detach", str(tree), commits[number])
            try:
                done = subprocess.run(
                    [sys.executable, "-m", "servelab", "check", "--app", "shop:app",
                     "--app-dir", str(tree / "web"), "--baseline-ref", commits[number - 1],
                     "--fail-if", fail_if, "--budget", str(budget), "--inconclusive",
                     "pass", "--results", str(results)],
                    capture_output=True, text=True, timeout=1800, check=False,
                )
            finally:
                git(repo, "worktree", "remove", "--force", str(tree))
            if done.returncode not in (0, 1):
                print(f"commit {number}: check exited {done.returncode}: "
                      f"{done.stderr.strip().splitlines()[-1:]}", flush=True)
            else:
                print(f"  commit {number} of {len(commits) - 1} checked "
                      f"({time.monotonic() - began:.0f} s)", flush=True)
    return time.monotonic() - began


def judged(results: Path, commits: list[str], steps: dict[int, float]) -> dict[str, dict]:
    """Per figure: the change points' commits, sizes and intervals, each step's nearest
    change point (found within one commit), the false ones, and the noise band."""
    index = {commit: number for number, commit in enumerate(commits)}
    found = {}
    for key, metric in METRICS.items():
        for (machine, workload), points in read_points(results, metric).items():
            series = build_series(machine, workload, metric, points, DEFAULT_FALSE_ALARMS)
            at = [index[series.commits[c.index].commit] for c in series.changes]
            near = {step: [a for a in at if abs(a - step) <= 1] for step in steps}
            false = [a for a in at if all(abs(a - step) > 1 for step in steps)]
            # Each step as the check across it measured it (commit k against k - 1).
            by_check: dict[int, dict[str, float]] = {}
            for point in points:
                by_check.setdefault(point.check_id, {})[point.role] = point.value
                if point.role == "candidate":
                    by_check[point.check_id]["commit"] = index[point.commit]
            measured = {
                str(int(check["commit"])): 100 * (check["candidate"] / check["baseline"] - 1)
                for check in by_check.values()
                if check.get("commit") in steps and "baseline" in check
            }
            found[key] = {
                "band_pct": series.band_pct(),
                "changes": [
                    {"commit": a, "change_pct": c.change_pct, "interval_pct": c.interval_pct}
                    for a, c in zip(at, series.changes, strict=True)
                ],
                "found": {str(step): bool(near[step]) for step in steps},
                "exact": {str(step): step in at for step in steps},
                "false": false,
                "commits": len(series.commits),
                "measured_steps": measured,
            }
    return found


def page_figures(results: Path) -> dict[str, float]:
    """`servelab history` on the run's results: the page's size and its time to open."""
    from servelab.report import browser

    out = results.parent / "history"
    subprocess.run([sys.executable, "-m", "servelab", "history", "--results", str(results),
                    "--out", str(out)], capture_output=True, text=True, check=True, timeout=600)
    page = out / "history.html"
    began = time.monotonic()
    browser.rendered_dom(page)
    return {"page_bytes": page.stat().st_size, "open_s": time.monotonic() - began}


def report(out: Path) -> None:
    path = out / "runs.jsonl"
    lines = [json.loads(text) for text in path.read_text().splitlines()] if path.is_file() else []
    if not lines:
        print(f"no runs kept in {path}")
        return
    for fail_if in dict.fromkeys(x.get("fail_if", "rps < -5%") for x in lines):
        report_design([x for x in lines if x.get("fail_if", "rps < -5%") == fail_if], fail_if)


def report_design(lines: list[dict], fail_if: str) -> None:
    print(f"--fail-if {fail_if!r}: {len(lines)} runs (servelab "
          f"{', '.join(sorted({x['commit'] for x in lines}))}); "
          f"{lines[-1]['commits']} commits, steps {lines[-1]['steps']}, --budget "
          f"{lines[-1]['budget']:g}; a run took {statistics.median(x['wall'] for x in lines):.0f}"
          " s (median)")
    for key in METRICS:
        mine = [x["figures"][key] for x in lines if key in x["figures"]]
        if not mine:
            continue
        for step, size in lines[-1]["steps"].items():
            hits = sum(m["found"][step] for m in mine)
            exact = sum(m["exact"][step] for m in mine)
            print(f"  {key}: the {size:g} % step at commit {step} found within one commit in "
                  f"{hits} of {len(mine)} runs ({exact} at it)")
        bands = [m["band_pct"] for m in mine if m["band_pct"] is not None]
        print(f"  {key}: false change points {sum(len(m['false']) for m in mine)} in "
              f"{len(mine)} runs; noise band +-{statistics.median(bands):.1f} % (median)")
    sizes = [x["page"]["page_bytes"] for x in lines]
    opens = [x["page"]["open_s"] for x in lines]
    print(f"  page {statistics.median(sizes) / 1024:.0f} KiB; opened in Chromium in "
          f"{statistics.median(opens):.2f} s (median; {min(opens):.2f}-{max(opens):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--steps", default="10:5,20:10,30:20")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--fail-if", default="rps < -5%",
                        help="each check's threshold: 'instructions > +5%%' counts the app's "
                        "instructions per request (no load, no calibration) instead")
    add_share_option(parser)
    parser.add_argument("--out", type=Path, help="keep each run's line in OUT/runs.jsonl")
    parser.add_argument("--report", action="store_true", help="sum up the runs kept in --out")
    args = parser.parse_args()
    if args.report:
        if args.out is None:
            parser.error("--report needs --out DIR")
        report(args.out)
        return
    steps = parse_steps(args.steps)
    for run in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="servelab-history-bench-"))
        # Counted instructions are the app's own, almost all the hashing (share 1).
        counted = args.fail_if.strip().startswith("instructions")
        share = args.share or (1.0 if counted else hashing_share(work))
        commits = repository(work / "repo", args.commits, steps, share)
        results = work / "results"
        wall = check_each(work / "repo", commits, args.budget, results, args.fail_if)
        figures = judged(results, commits, steps)
        line = {
            "commits": args.commits, "steps": {str(k): 100 * v for k, v in steps.items()},
            "budget": args.budget, "fail_if": args.fail_if, "share": share, "wall": wall,
            "figures": figures,
            "page": page_figures(results), "commit": COMMIT,
            "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            with open(args.out / "runs.jsonl", "a") as file:
                file.write(json.dumps(line) + "\n")
        for key, figure in figures.items():
            changes = ", ".join(
                f"{c['commit']}: {c['change_pct']:+.1f} % [{c['interval_pct'][0]:+.1f}, "
                f"{c['interval_pct'][1]:+.1f}]" for c in figure["changes"]
            )
            print(f"run {run + 1}, {key}: change points {changes or 'none'}; steps found "
                  f"{figure['found']}; false {figure['false']}; band "
                  f"+-{figure['band_pct'] or 0:.1f} %; the checks across the steps read "
                  + ", ".join(f"{k}: {v:+.1f} %" for k, v in figure["measured_steps"].items()),
                  flush=True)
        kept = ""
        if args.out is not None:  # the checks' results kept beside the line; the rest goes
            kept = args.out / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
            kept.mkdir(parents=True)
            for part in ("results", "history"):  # the checks' results, the page
                if (work / part).exists():
                    shutil.move(str(work / part), str(kept / part))
        shutil.rmtree(work)
        print(f"run {run + 1}: {wall:.0f} s; page {line['page']['page_bytes'] / 1024:.0f} KiB, "
              f"opened in {line['page']['open_s']:.2f} s"
              + (f"; results kept in {kept}" if kept else ""), flush=True)


if __name__ == "__main__":
    sys.exit(main())
