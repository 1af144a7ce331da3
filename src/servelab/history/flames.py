"""A change point's differential flame graph: where the CPU per request went between the
commits on either side. A stored check that measured a commit before the change against
one at or after it, with ``--profile``, has both sides' profiles; the nearest such pair
is drawn (red where the later commit's CPU per request grew), written beside the page
and linked from its change point."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from servelab.history.series import INSTRUCTIONS, Point, Series


def nearest_check(series: Series, points: Sequence[Point], index: int) -> int | None:
    """The check whose baseline is a commit before ``index`` and whose candidate one at or
    after it, the pair nearest to the two commits on either side; None if no check spans
    the change. (Whether it was profiled is asked when drawing.)"""
    order = {level.commit: i for i, level in enumerate(series.commits)}
    sides: dict[int, dict[str, int]] = {}
    for point in points:
        if point.commit in order:
            sides.setdefault(point.check_id, {})[point.role] = order[point.commit]
    spanning = [
        ((index - 1 - s["baseline"]) + (s["candidate"] - index), check)
        for check, s in sides.items()
        if {"baseline", "candidate"} <= s.keys() and s["baseline"] < index <= s["candidate"]
    ]
    return min(spanning)[1] if spanning else None


def change_flames(
    results_dir: Path, series: Sequence[tuple[Series, Sequence[Point]]], target: Path
) -> dict[tuple[int, int], str]:
    """(series number, change index) -> the file name (in ``target``) of the flame graph
    of the check nearest the change; changes with no profiled check spanning them have
    none. Each check's graph is drawn and written once."""
    from servelab.check import why_candidate
    from servelab.report.base import load_result

    drawn: dict[int, str | None] = {}
    links: dict[tuple[int, int], str] = {}
    for number, (one, points) in enumerate(series):
        if one.metric.key == INSTRUCTIONS.key:
            continue  # counted with no load: no profile
        for change in one.changes:
            check = nearest_check(one, points, change.index)
            if check is None:
                continue
            if check not in drawn:
                report, directory, _ = load_result(str(check), results_dir)
                _, svg = why_candidate(report.runs, directory, draw=True)
                drawn[check] = None
                if svg is not None:
                    name = f"flame-check-{check}.svg"
                    target.mkdir(parents=True, exist_ok=True)
                    (target / name).write_text(svg, encoding="utf-8")
                    drawn[check] = name
            if (drawn_file := drawn[check]) is not None:
                links[(number, change.index)] = drawn_file
    return links
