"""The app's history from a results directory: every finished `servelab check` names the
commits of the two versions it measured (the environment's ``app_versions``), so each
check gives a figure for each of them. Points of one commit from several checks are its
reruns: their spread is the noise band the change points are judged against.

Results from different machines (host, CPU model, CPU count, kernel: the environment's
machine facts) are never mixed in one series: each machine has its own.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from servelab.analysis.metrics import METRIC_BY_KEY, Metric
from servelab.history.changes import ChangePoint, change_points, rerun_sd
from servelab.prepare.environment import FACTS
from servelab.results.records import RunRecord

CHECK_EXPERIMENT = "check"


def _counted_only(_: object) -> float:
    raise TypeError("instructions are counted under valgrind, not read from a run")


# The app's instructions per request, from checks on `--fail-if instructions`
# (check.instructions): counted with no load, so no run or slice has it.
INSTRUCTIONS = Metric("instructions", "Instructions per request", "instructions", False,
                      _counted_only, _counted_only, short="instructions per request")
# What a history follows: the check's own figures (analysis.metrics), per version the
# geometric mean of its runs'. Requests per CPU second is the inverse of the stack's CPU
# per request: what a change of the app's code moves, whatever else the machine ran.
# Instruction counts: each count of a version is a point of its own.
HISTORY_METRICS = ("rps", "rps_per_cpu", INSTRUCTIONS.key)
METRICS = {**{key: METRIC_BY_KEY[key] for key in HISTORY_METRICS[:2]},
           INSTRUCTIONS.key: INSTRUCTIONS}
# Counts alike to the instruction leave no spread to judge a change against: the noise is
# taken as at least a tenth of a percent (two counts of the seed's FastAPI endpoint were
# 0.04 % apart), so a change point is a change of the code's work, of half a percent or
# more.
COUNT_NOISE_FLOOR = 0.001


def figure(metric: Metric, runs: Sequence[RunRecord]) -> float | None:
    values = [v for v in map(metric.value, runs) if v > 0]
    return statistics.geometric_mean(values) if values else None


@dataclass(frozen=True)
class Point:
    """One version's figure in one check."""

    commit: str
    time: str  # the commit's committer time (ISO 8601)
    value: float
    check_id: int
    role: str  # candidate / baseline
    dirty: bool = False


@dataclass(frozen=True)
class CommitLevel:
    commit: str
    time: str
    values: tuple[float, ...]  # every check's figure of it

    @property
    def level(self) -> float:
        return statistics.geometric_mean(self.values)


@dataclass(frozen=True)
class Series:
    machine: str
    workload: str
    metric: Metric
    commits: tuple[CommitLevel, ...]  # oldest first
    noise_sd: float | None  # of one figure's log, from reruns; None without reruns
    changes: tuple[ChangePoint, ...]

    def band_pct(self) -> float | None:
        """The noise band: +-2 sd of one figure, in percent."""
        return None if self.noise_sd is None else 100 * math.expm1(2 * self.noise_sd)


def machine_of(environment: dict[str, object]) -> str:
    machine_keys = [fact.key for fact in FACTS if fact.machine]
    return ", ".join(str(environment.get(key, "?")) for key in machine_keys)


def read_points(results_dir: Path, metric: Metric) -> dict[tuple[str, str], list[Point]]:
    """(machine, workload) -> every finished check's figures of both versions that name a
    commit without uncommitted changes."""
    from servelab.results.database import DB_FILE, Database

    if metric.key == INSTRUCTIONS.key:
        return read_counts(results_dir)
    if not (results_dir / DB_FILE).is_file():
        return {}
    database = Database(results_dir / DB_FILE)
    found: dict[tuple[str, str], list[Point]] = {}
    try:
        for row in database.list_experiments():
            if row.name != CHECK_EXPERIMENT or row.finished_at is None:
                continue
            environment = database.environment(row.id)
            versions = environment.get("app_versions") or {}
            if len({str(v.get("python")) for v in versions.values()}) > 1:
                continue  # one code, two environments (bisect --lock-good): not a commit's
            runs = database.runs(row.id)
            for role, version in versions.items():
                commit = version.get("commit")
                if not commit or version.get("dirty"):
                    continue
                for workload in sorted({r.workload for r in runs}):
                    mine = [r for r in runs if r.variant == role and r.workload == workload]
                    value = figure(metric, mine)
                    if value is None:
                        continue
                    found.setdefault((machine_of(environment), workload), []).append(
                        Point(commit, str(version.get("time", "")), value, row.id, role)
                    )
    finally:
        database.close()
    return found


def read_counts(results_dir: Path) -> dict[tuple[str, str], list[Point]]:
    """(machine, workload) -> every count of both versions in the instruction checks kept
    in ``results_dir`` (check.instructions), but a baseline's counts reused from an
    earlier check (bisect) and the versions of checks of two environments. A file that
    cannot be read is left out."""
    from servelab.check.instructions import RESULTS_SUBDIR, WORKLOAD, read_record

    found: dict[tuple[str, str], list[Point]] = {}
    paths = sorted((results_dir / RESULTS_SUBDIR).glob("*/counts.json"))
    for number, path in enumerate(paths, start=1):
        record = read_record(path)
        if record is None:
            continue
        environment = record["environment"]
        versions = environment.get("app_versions") or {}
        if len({str(v.get("python")) for v in versions.values()}) > 1:
            continue  # one code, two environments (bisect --lock-good): not a commit's
        for role, version in versions.items():
            commit = version.get("commit")
            if not commit or version.get("dirty") or role in record["reused"]:
                continue
            for value in record["instructions_per_request"].get(role, []):
                found.setdefault((machine_of(environment), WORKLOAD), []).append(
                    Point(commit, str(version.get("time", "")), float(value), number, role)
                )
    return found


def build_series(
    machine: str, workload: str, metric: Metric, points: Sequence[Point],
    false_alarms_per_100: float,
) -> Series:
    by_commit: dict[str, list[Point]] = {}
    for point in points:
        by_commit.setdefault(point.commit, []).append(point)
    commits = tuple(sorted(
        (CommitLevel(c, ps[0].time, tuple(p.value for p in ps)) for c, ps in by_commit.items()),
        key=lambda level: level.time,
    ))
    noise = rerun_sd({c.commit: c.values for c in commits})
    if metric.key == INSTRUCTIONS.key:
        noise = max(noise or 0.0, COUNT_NOISE_FLOOR)
    changes: tuple[ChangePoint, ...] = ()
    if noise and len(commits) >= 4:
        changes = tuple(
            change_points([c.level for c in commits], noise, false_alarms_per_100)
        )
    return Series(machine, workload, metric, commits, noise, changes)
