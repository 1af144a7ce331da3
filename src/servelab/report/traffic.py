"""What ``servelab traffic`` says of a log: the same figures on the terminal (rich), in
traffic.md, traffic.json, and traffic.html with the rate-over-time chart inlined
(traffic.svg, traffic.png), so that the words and the files never disagree.

The figures are ``servelab.traffic.describe``'s summary; this module only words them.
matplotlib (an extra) is imported by the chart alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from tabulate import tabulate

from servelab.traffic.describe import PATHS_COUNTED, TrafficSummary
from servelab.traffic.reading import ReadCounts
from servelab.traffic.sparkline import sparkline

if TYPE_CHECKING:  # matplotlib is an extra
    from servelab.report.drawing import Chart

SPARK_WIDTH = 60
STEP_WORDS = {1: "per second", 60: "per minute", 3600: "per hour"}


def when(epoch: float) -> str:
    """``2024-05-06 14:03:09 UTC``."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def how_long(seconds: float) -> str:
    """``45 s``, ``10 min 5 s``, ``2 h 05 min``, ``3 d 4 h``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min" + (f" {whole % 60} s" if whole % 60 else "")
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


def _counted(pairs: Sequence[tuple[object, int]], whole: int) -> str:
    """``GET 9,000 (90.0 %), POST 1,000 (10.0 %)``."""
    return ", ".join(f"{'-' if key is None else key} {n:,} ({_share(n, whole)})"
                     for key, n in pairs) or "-"


def rate_line(summary: TrafficSummary, width: int = SPARK_WIDTH) -> str:
    """The sparkline of the rate over time, with its scale: ``▁▂█▃  0 to 282 req/s,
    counted per second``."""
    rates = [rate for _, rate in summary.series]
    if not rates:
        return "-"
    return (f"{sparkline(rates, width)}  0 to {max(rates):,.4g} req/s, counted "
            f"{STEP_WORDS.get(summary.series_step_s, f'per {summary.series_step_s} s')}")


def summary_rows(summary: TrafficSummary, reading: ReadCounts | None) -> list[tuple[str, str]]:
    """(label, value): the log read, its time span, how much and how fast."""
    rows = []
    if reading is not None:
        rows += [
            ("files", f"{reading.files}"),
            ("lines", f"{reading.lines:,}: {reading.read:,} read, {reading.unreadable:,} "
                      f"unreadable, {reading.reordered:,} reordered, {reading.too_late:,} "
                      "too late to reorder"),
        ]
        if reading.first_unreadable is not None:
            rows.append(("first unreadable", str(reading.first_unreadable)))
    if summary.first_time is None or summary.last_time is None:
        return [*rows, ("requests", "0")]
    rows += [
        ("time", f"{when(summary.first_time)} to {when(summary.last_time)} "
                 f"({how_long(summary.duration_s)})"),
        ("requests", f"{summary.requests:,}"),
        ("mean rate", f"{summary.mean_rate:,.2f} req/s, {summary.mean_per_minute:,.1f} req/min"),
    ]
    if summary.peak_second is not None:
        peak = summary.peak_second
        rows.append(("peak second", f"{peak.requests:,} req/s at {when(peak.at)} "
                                    f"({peak.requests / summary.mean_rate:.1f}× the mean)"))
    if summary.peak_minute is not None:
        peak = summary.peak_minute
        # Against the mean only with two minutes or more: a shorter log's minutes are cut.
        ratio = (f" ({peak.requests / summary.mean_per_minute:.1f}× the mean)"
                 if summary.duration_s >= 120 else "")
        rows.append(("peak minute", f"{peak.requests:,} req/min at {when(peak.at)[:-7]} UTC"
                                    + ratio))
    rows += [
        ("rate over time", rate_line(summary)),
        ("methods", _counted(summary.methods, summary.requests)),
        ("status codes", _counted(summary.statuses, summary.requests)),
    ]
    return rows


def route_rows(
    summary: TrafficSummary, top: int
) -> tuple[list[tuple[str, str, str, str, str]], str]:
    """The ``top`` routes' rows (route, requests, share, distinct paths, methods) and a
    line for the rest ("" when none are left out)."""
    shown = summary.routes[: max(top, 0)]
    rows = [(r.route, f"{r.requests:,}", _share(r.requests, summary.requests),
             f"{r.paths:,}" + ("+" if r.paths >= PATHS_COUNTED else ""),
             ", ".join(f"{method} {n:,}" for method, n in r.methods)) for r in shown]
    rest = summary.routes[len(shown):]
    if not rest:
        return rows, ""
    requests = sum(r.requests for r in rest)
    return rows, (f"and {len(rest):,} more route{'s' if len(rest) > 1 else ''}: "
                  f"{requests:,} requests "
                  f"({_share(requests, summary.requests)}); --top shows more")


ROUTE_HEADER = ("route", "requests", "share", "paths", "methods")


def terminal(summary: TrafficSummary, reading: ReadCounts | None, top: int) -> Group:
    """The whole description for ``console.print``."""
    facts = Table(show_header=False, box=None, pad_edge=False)
    facts.add_column(style="bold", no_wrap=True)
    facts.add_column()
    for label, value in summary_rows(summary, reading):
        facts.add_row(Text(label), Text(value))
    parts: list[RenderableType] = [facts]
    rows, rest = route_rows(summary, top)
    if rows:
        routes = Table(title=Text("Routes (ids collapsed)"), title_justify="left")
        for index, column in enumerate(ROUTE_HEADER):
            routes.add_column(Text(column), justify="right" if index in (1, 2, 3) else "left")
        for row in rows:
            routes.add_row(*map(Text, row))
        parts.append(routes)
    if rest:
        parts.append(Text(rest, style="dim"))
    return Group(*parts)


def markdown(summary: TrafficSummary, reading: ReadCounts | None, top: int,
             title: str = "Traffic") -> str:
    """traffic.md."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    facts = [f"- **{label}**: {value}" for label, value in summary_rows(summary, reading)]
    lines = [f"# {title}", "", *facts, ""]
    rows, rest = route_rows(summary, top)
    if rows:
        lines += ["## Routes", "", "Ids collapsed: `{id}` a number, `{uuid}` a UUID, "
                  "`{token}` a long hex or base64 token.", "",
                  tabulate([[cell(c) for c in row] for row in rows], headers=ROUTE_HEADER,
                           colalign=("left", "right", "right", "left"),
                           tablefmt="github", disable_numparse=True), ""]
        if rest:
            lines += [rest[0].upper() + rest[1:] + ".", ""]
    return "\n".join(lines)


def as_json(summary: TrafficSummary, reading: ReadCounts | None) -> str:
    """traffic.json: the summary, and what reading the log met under ``reading``."""
    data = summary.as_json()
    data["reading"] = None if reading is None else asdict(reading)
    return json.dumps(data, indent=2) + "\n"


def rate_chart(summary: TrafficSummary) -> Chart:
    """Requests per second over time, at the summary's step, the mean dashed."""
    import matplotlib
    import matplotlib.dates as mdates

    from servelab.report.drawing import STYLE, new_figure, render

    step = STEP_WORDS.get(summary.series_step_s, f"per {summary.series_step_s} s")
    figure = new_figure(10.0, 3.2)
    with matplotlib.rc_context(STYLE):
        ax = figure.subplots()
        times = mdates.date2num([datetime.fromtimestamp(t, UTC) for t, _ in summary.series])
        rates = [rate for _, rate in summary.series]
        ax.step(times, rates, where="post", color="#4c6a92", lw=0.9)
        ax.fill_between(times, rates, step="post", color="#4c6a92", alpha=0.25, lw=0)
        ax.axhline(summary.mean_rate, color="#d0463b", ls="--", lw=1,
                   label=f"mean {summary.mean_rate:,.1f} req/s")
        ax.set_ylim(bottom=0, top=max([*rates, summary.mean_rate, 1e-9]) * 1.08)
        locator = mdates.AutoDateLocator(tz=UTC)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
        ax.set_xlabel("time (UTC)")
        ax.set_ylabel(f"requests/s, counted {step}")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper left", frameon=False)
    peak = summary.peak_second
    said = "" if peak is None else f"; the busiest second had {peak.requests:,} requests"
    return render(figure, "traffic", "Requests per second over time",
                  f"The log's requests per second, counted {step}, with its mean "
                  f"dashed{said}.")


def write_files(directory: Path, summary: TrafficSummary, reading: ReadCounts | None,
                top: int, title: str = "Traffic") -> list[Path]:
    """traffic.json, traffic.md, the chart (traffic.svg, traffic.png; not without
    matplotlib or requests) and traffic.html (self-contained) in ``directory``; the
    paths written."""
    from servelab.report.base import NO_MATPLOTLIB, draw_if_installed
    from servelab.report.html import standalone_page

    directory.mkdir(parents=True, exist_ok=True)
    text = markdown(summary, reading, top, title)
    chart = draw_if_installed(lambda: rate_chart(summary)) if summary.series else None
    written = [directory / "traffic.json", directory / "traffic.md"]
    written[0].write_text(as_json(summary, reading))
    if chart is not None:
        (directory / "traffic.svg").write_text(chart.svg)
        (directory / "traffic.png").write_bytes(chart.png)
        written += [directory / "traffic.svg", directory / "traffic.png"]
    elif summary.series:
        text += f"\n{NO_MATPLOTLIB}\n"
    written[1].write_text(text)
    figures = [(chart, chart.description)] if chart is not None else []
    (directory / "traffic.html").write_text(standalone_page(title, figures, text))
    written.append(directory / "traffic.html")
    return written

