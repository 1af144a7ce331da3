"""The fault matrix: SIGINT, SIGTERM and SIGKILL in the middle of a sliced (side-by-side)
experiment and of the backlog study (network namespaces), then `--resume`.

For each case it reports the exit code, what was left behind (processes launched by
that servelab, its network namespaces, servelab temp dirs, its cgroups), and after the
resume whether a run was lost (a run stored before the signal missing or changed) or
duplicated (a (variant, workload, repetition) twice, in the database or in runs.jsonl).

    .venv/bin/python benchmarks/faults.py [--cases sliced,backlog] [--signals INT,TERM,KILL]

Every servelab run is bounded (--budget, a few requests); needs root for namespaces.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servelab.launch import launched_by

SERVELAB = [sys.executable, "-m", "servelab"]
CASES = {
    # side by side, sliced, two endpoints; the budget bounds the rounds
    "sliced": ["study", "quick", "-r", "2", "-d", "2", "--endpoints", "sync-small,async-small",
               "--warmup", "20", "--budget", "20s"],
    # two somaxconn values, each stack in its own network namespace
    "backlog": ["study", "backlog", "--sleep", "0.2", "--rate", "50", "-n", "60",
                "--somaxconn", "128,1024", "-r", "2"],
}
SIGNALS = {"INT": signal.SIGINT, "TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


def namespaces(pid: int) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(f"servelab-{pid}-")]


def cgroups(pid: int) -> list[str]:
    return [str(p) for p in Path("/sys/fs/cgroup").rglob(f"servelab-{pid}-*")]


def temp_dirs() -> set[str]:
    return {str(p) for p in Path(tempfile.gettempdir()).glob("servelab-*")}


def stored(root: Path) -> list[tuple[str, str, int, str]]:
    db = root / "servelab.db"
    if not db.exists():
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute(
            "SELECT variant, workload, repetition, record_json FROM runs ORDER BY id"
        ).fetchall()


def mirrored(root: Path) -> list[tuple[str, str, int]]:
    found = []
    for path in root.glob("*/runs.jsonl"):
        for line in path.read_text().splitlines():
            run = json.loads(line)
            found.append((run["variant"], run["workload"], run["repetition"]))
    return found


def trial(case: str, name: str) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix="faults-"))
    argv = [*SERVELAB, *CASES[case], "--results", str(root)]
    before_dirs = temp_dirs()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(stored(root)) < 1:
        time.sleep(0.2)
    time.sleep(1.5)  # in the middle of the next run
    kept_before = stored(root)
    if SIGNALS[name] == signal.SIGKILL:
        proc.kill()  # servelab itself gets no chance: its janitor must clean up
    else:
        os.killpg(proc.pid, SIGNALS[name])  # a terminal's Ctrl-C / a service manager
    _, stderr = proc.communicate(timeout=120)
    settle = time.monotonic() + 20
    while time.monotonic() < settle and (launched_by(proc.pid) or namespaces(proc.pid)):
        time.sleep(0.2)
    left = {
        "processes": len(launched_by(proc.pid)),
        "namespaces": len(namespaces(proc.pid)),
        "temp dirs": len(temp_dirs() - before_dirs),
        "cgroups": len(cgroups(proc.pid)),
    }
    resumed = subprocess.run([*argv, "--resume"], capture_output=True, text=True, timeout=600)
    after = stored(root)
    keys = [(v, w, r) for v, w, r, _ in after]
    lost = [run for run in kept_before if run not in after]
    jsonl = mirrored(root)
    shutil.rmtree(root, ignore_errors=True)
    return {
        "case": case, "signal": f"SIG{name}", "exit": proc.returncode,
        "traceback": "Traceback" in stderr, **left,
        "runs before": len(kept_before), "resume exit": resumed.returncode,
        "runs after": len(after), "lost": len(lost),
        "duplicated (db)": len(keys) - len(set(keys)),
        "duplicated (runs.jsonl)": len(jsonl) - len(set(jsonl)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="sliced,backlog")
    parser.add_argument("--signals", default="INT,TERM,KILL")
    args = parser.parse_args()
    rows = [trial(c, s) for c in args.cases.split(",") for s in args.signals.split(",")]
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in columns) + " |", flush=True)


if __name__ == "__main__":
    main()
