"""The history page: per machine, workload and metric, the figure of every commit checked
(each check's figure marked, the commit's level joined), the noise band, the change points
with their size and interval, and the changes the user marked as known. One
self-contained HTML page (charts inline, no script: it opens offline) and its markdown
summary."""

from __future__ import annotations

import functools
import itertools
import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from servelab.history.series import Series
from servelab.report.base import NO_MATPLOTLIB, draw_if_installed
from servelab.report.html import standalone_page

if TYPE_CHECKING:  # matplotlib is an extra
    from servelab.report.drawing import Chart


def known_at(series: Series, known: Mapping[str, str]) -> dict[int, str]:
    """Commit index -> the reason the user gave, for the commits marked as known (a
    marked revision matches a commit that starts with it)."""
    return {
        i: reason
        for i, level in enumerate(series.commits)
        for prefix, reason in known.items()
        if level.commit.startswith(prefix)
    }


def series_chart(series: Series, known: Mapping[str, str], name: str) -> Chart:
    import matplotlib

    from servelab.report.drawing import STYLE, new_figure, render

    figure = new_figure(9.0, 3.6)
    with matplotlib.rc_context(STYLE):
        axes = figure.subplots()
        xs = range(len(series.commits))
        for i, level in enumerate(series.commits):
            axes.plot([i] * len(level.values), level.values, "o", color="#9aa5b1", ms=3)
        axes.plot(list(xs), [c.level for c in series.commits], "-o", color="#4c6a92", ms=4,
                  label="commit's level")
        edges = [0, *(c.index for c in series.changes), len(series.commits)]
        for start, stop in itertools.pairwise(edges):
            levels = [c.level for c in series.commits[start:stop]]
            if not levels or series.noise_sd is None:
                continue
            middle = statistics.geometric_mean(levels)
            factor = 1 + (series.band_pct() or 0) / 100
            axes.fill_between([start - 0.4, stop - 0.6], middle / factor, middle * factor,
                              color="#4c6a92", alpha=0.12, lw=0)
        for change in series.changes:
            low, high = change.interval_pct
            axes.axvline(change.index - 0.5, color="#d0463b", ls="--", lw=1)
            axes.annotate(f"{change.change_pct:+.1f} % [{low:+.1f}, {high:+.1f}]",
                          (change.index - 0.5, 1), xycoords=("data", "axes fraction"),
                          xytext=(3, -10), textcoords="offset points", fontsize=7.5,
                          color="#d0463b")
        for index, reason in known_at(series, known).items():
            axes.axvline(index - 0.5, color="#7a7f87", ls=":", lw=1)
            axes.annotate(f"known: {reason}", (index - 0.5, 0),
                          xycoords=("data", "axes fraction"), xytext=(3, 4),
                          textcoords="offset points", fontsize=7.5, color="#7a7f87")
        axes.set_xticks(list(xs), [c.commit[:7] for c in series.commits], rotation=90,
                        fontsize=6.5)
        axes.set_ylabel(f"{series.metric.label} [{series.metric.unit}]")
        axes.grid(alpha=0.3)
    title = f"{series.metric.label}, {series.workload}, on {series.machine}"
    return render(figure, name, title,
                  "Each check's figure of a commit (grey), the commit's level (blue), the "
                  "noise band from reruns (shaded), change points (red) and known changes "
                  "(dotted).")


def series_lines(
    series: Series, known: Mapping[str, str], flames: Mapping[int, str] | None = None
) -> list[str]:
    """The series' markdown: its noise band and change points (``flames``: change index
    -> the file of its differential flame graph, linked)."""
    flames = flames or {}
    band = series.band_pct()
    lines = [
        f"## {series.metric.label}, {series.workload}, on {series.machine}", "",
        f"{len(series.commits)} commits, "
        f"{sum(len(c.values) for c in series.commits)} figures; noise band "
        + (f"±{band:.1f} % (2 sd of one figure, from reruns of the same commit)"
           if band is not None else "unknown: no commit was checked twice (no change points "
           "are looked for without it)"),
        "",
    ]
    marked = known_at(series, known)
    if series.changes:
        lines += ["| at commit | after | change | 95 % interval | known | flame graph |",
                  "|---|---|---:|---|---|---|"]
        for change in series.changes:
            at, before = series.commits[change.index], series.commits[change.index - 1]
            low, high = change.interval_pct
            flame = flames.get(change.index)
            lines.append(
                f"| `{at.commit[:10]}` | `{before.commit[:10]}` | {change.change_pct:+.1f} % | "
                f"[{low:+.1f}, {high:+.1f}] % | {marked.get(change.index, '')} | "
                f"{f'[{flame}]({flame})' if flame else ''} |"
            )
    elif band is not None:
        lines.append("No change point.")
    return [*lines, ""]


def write_page(
    series: Sequence[Series], known: Mapping[str, str], false_alarms_per_100: float,
    flames: Mapping[tuple[int, int], str] | None = None,
) -> tuple[str, str]:
    """(markdown, html) of the history page; ``flames`` ((series number, change index) ->
    file beside the page: ``history.flames.change_flames``) linked at their changes."""
    flames = flames or {}
    head = [
        "# servelab history", "",
        f"Change points at a false-alarm rate of {false_alarms_per_100:g} per 100 unchanged "
        "commits, judged against each series' own noise band.", "",
    ]
    markdown_lines = list(head)
    figures = []
    links: list[tuple[str, str]] = []
    for number, one in enumerate(series):
        mine = {index: name for (n, index), name in flames.items() if n == number}
        markdown_lines += series_lines(one, known, mine)
        for index, name in sorted(mine.items()):
            links.append((name, f"{one.metric.label}, {one.workload}: where the CPU per "
                          f"request went at {one.commits[index].commit[:10]} "
                          "(differential flame graph)"))
        if one.commits:
            chart = draw_if_installed(
                functools.partial(series_chart, one, known, f"history-{number}"))
            if chart is None:
                markdown_lines += [NO_MATPLOTLIB, ""]
            else:
                figures.append((chart, f"{chart.title}: {chart.description}"))
    markdown = "\n".join(markdown_lines) + "\n"
    return markdown, standalone_page("servelab history", figures, markdown, links)
