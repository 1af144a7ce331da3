"""What a tune says: the ranking, the recommendation, the dropped candidates with when
and why (markdown, JSON), and a chart of the race. Written after every round."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from servelab.results.records import RunRecord
from servelab.tune.objective import Objective
from servelab.tune.race import RaceSettings, RaceState, Standing
from servelab.tune.recommendation import Recommendation

TUNE_JSON = "tune.json"
TUNE_MARKDOWN = "tune.md"
TUNE_CHART = "tune.png"


def _figure(value: float, unit: str) -> str:
    return f"{value:,.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"


def ranking_markdown(
    state: RaceState,
    recommendation: Recommendation,
    objective: Objective,
    *,
    candidates: int,
    stopped: str | None,
    dropped: bool = True,
) -> str:
    """The ranking as GitHub-flavoured markdown (also what the terminal shows); without
    ``dropped``, the dropped candidates are one line pointing to tune.md."""
    metric = objective.metric
    lines = [
        "# servelab tune",
        "",
        f"Objective: {objective.describe()}. {candidates} candidates, {state.rounds} "
        f"round(s) of fresh starts; {len(state.dropped)} dropped, {len(state.standings)} left.",
        f"Race over: {stopped or state.over or 'not yet'}.",
        "",
    ]
    if recommendation.candidate:
        lines += [f"**Recommended: {recommendation.candidate}** — {recommendation.reason}.", ""]
    elif recommendation.indistinguishable:
        lines += [f"**Not decided yet**: {recommendation.reason}.", ""]
    else:
        lines += [f"**No recommendation**: {recommendation.reason}.", ""]
    lines += [
        "## Contenders",
        "",
        f"| # | candidate | starts | {metric.label} (95 % CI) | vs leader (95 % CI) | p99 | "
        "memory | limits |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rank, s in enumerate(state.standings, start=1):
        interval = (
            f" ({s.interval[0]:,.1f} … {s.interval[1]:,.1f})" if s.interval is not None else ""
        )
        versus = "leader" if rank == 1 else "—"
        if s.versus_leader is not None and s.versus_leader.difference_pct is not None:
            bounds = s.versus_leader.interval_pct
            versus = f"{s.versus_leader.difference_pct:+.1f} %"
            if bounds is not None:
                versus += f" ({bounds[0]:+.1f} … {bounds[1]:+.1f} %)"
        lines.append(
            f"| {rank} | {s.candidate} | {s.starts} | {_figure(s.mean, metric.unit)}{interval} "
            f"| {versus} | {s.p99_ms:.1f} ms | {s.memory_mib:.0f} MiB | "
            f"{'kept' if s.meets_limits else 'broken on average'} |"
        )
    if state.dropped and not dropped:
        lines += ["", f"{len(state.dropped)} dropped: each with when and why in "
                  f"{TUNE_MARKDOWN} (or here with -v)."]
    elif state.dropped:
        lines += ["", "## Dropped", "", "| candidate | after round | why |", "|---|---|---|"]
        lines += [f"| {d.candidate} | {d.after_round} | {d.reason} |" for d in state.dropped]
    return "\n".join(lines) + "\n"


def tune_document(
    state: RaceState,
    recommendation: Recommendation,
    objective: Objective,
    settings: RaceSettings,
    *,
    candidates: Sequence[str],
    stopped: str | None,
) -> dict[str, Any]:
    """tune.json: everything the ranking says, for programs (and ``servelab export``)."""

    def standing(s: Standing) -> dict[str, Any]:
        versus = s.versus_leader
        return {
            "candidate": s.candidate,
            "starts": s.starts,
            "mean": s.mean,
            "interval": s.interval,
            "versus_leader_pct": None if versus is None else versus.difference_pct,
            "versus_leader_interval_pct": None if versus is None else versus.interval_pct,
            "versus_leader_verdict": None if versus is None else versus.verdict,
            "p99_ms": s.p99_ms,
            "memory_mib": s.memory_mib,
            "error_ratio": s.error_ratio,
            "meets_limits": s.meets_limits,
        }

    return {
        "objective": {**asdict(objective), "metric": objective.metric.key},
        "settings": asdict(settings),
        "candidates": list(candidates),
        "rounds": state.rounds,
        "over": stopped or state.over,
        "recommended": recommendation.candidate,
        "reason": recommendation.reason,
        "winner": recommendation.winner,
        "runner_up": recommendation.runner_up,
        "indistinguishable": list(recommendation.indistinguishable),
        "more_rounds": recommendation.more_rounds,
        "contenders": [standing(s) for s in state.standings],
        "dropped": [asdict(d) for d in state.dropped],
    }


def write_tune_files(out_dir: Path, document: dict[str, Any], markdown: str) -> list[Path]:
    """tune.json and tune.md, each written whole (a reader never sees half a file)."""
    written = []
    for name, text in ((TUNE_JSON, json.dumps(document, indent=2)), (TUNE_MARKDOWN, markdown)):
        path = out_dir / name
        partial = path.with_suffix(path.suffix + ".partial")
        partial.write_text(text)
        partial.replace(path)
        written.append(path)
    return written


def recommended_in(result_dir: Path) -> tuple[str, str] | None:
    """(candidate, reason) a tune result recommends; None for other results or none."""
    path = result_dir / TUNE_JSON
    if not path.is_file():
        return None
    document = json.loads(path.read_text())
    if not document.get("recommended"):
        return None
    return document["recommended"], document.get("reason", "")


def undecided_in(result_dir: Path) -> str | None:
    """Why a tune result recommends nothing yet (its leaders are indistinguishable), or
    None: for other results, or one that recommends or found no candidate."""
    path = result_dir / TUNE_JSON
    if not path.is_file():
        return None
    document = json.loads(path.read_text())
    if document.get("recommended") or not document.get("indistinguishable"):
        return None
    return str(document.get("reason", ""))


def race_chart(
    runs: Sequence[RunRecord], state: RaceState, objective: Objective, highlight: str | None
) -> bytes | None:
    """PNG: each candidate's metric per round, dropped ones ending in a cross, the
    recommended one in bold; None without matplotlib (the [charts] extra)."""
    try:
        from servelab.report.drawing import new_figure, render
    except ImportError:
        return None
    metric = objective.metric
    figure = new_figure(8.0, 4.5)
    axes = figure.add_subplot()
    dropped = {d.candidate: d.after_round for d in state.dropped}
    names = sorted({r.variant for r in runs})
    for name in names:
        own = sorted((r for r in runs if r.variant == name), key=lambda r: r.repetition)
        xs = [r.repetition for r in own]
        ys = [metric.value(r) for r in own]
        if name == highlight:
            axes.plot(xs, ys, marker="o", linewidth=2.5, color="#1a7f37", label=name, zorder=3)
        elif name in dropped:
            axes.plot(xs, ys, color="#b0b0b0", linewidth=0.8)
            axes.plot(xs[-1:], ys[-1:], marker="x", color="#cf222e", linestyle="none")
        else:
            axes.plot(xs, ys, marker=".", linewidth=1.2, label=name)
    axes.set_xlabel("round (fresh start of every candidate still in)")
    axes.set_ylabel(f"{metric.label} [{metric.unit}]")
    axes.set_xticks(range(1, max(state.rounds, 1) + 1))
    axes.set_title(f"servelab tune: {objective.describe()}", fontsize=9)
    if highlight or state.standings:
        axes.legend(fontsize=7, loc="best")
    return render(
        figure, "tune", "The race", "each candidate's figure per round; crosses: dropped"
    ).png
