"""The charts of a result, chosen to fit it and drawn with matplotlib
(``servelab.report.drawing`` turns each figure into SVG text and PNG bytes).

Every chart is a pure function of the analysed result, so the same result always gives
the same SVG.

Charts:
- ``rps``: requests/s per variant, mean with its 95 % confidence interval,
  coloured by the verdict against the baseline; one panel per workload.
- ``latency``: p50 / p90 / p99 / max latency per variant (means over runs).
- ``heatmap``: for grids over two numeric knobs (workers × threads), mean
  requests/s in each cell.
- ``errors``: failed requests per variant by cause (HTTP code, connection
  error kind), and the classified log lines when the runs recorded them.
- ``ramp``: p99 latency and error ratio against the arrival rate, for
  open-model (fixed-rate) workloads at several rates — or any list of
  (rate, p99, error ratio) points given to :func:`ramp_chart`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import matplotlib
from matplotlib.figure import Figure

from servelab.analysis.metrics import answer_metric
from servelab.report.base import failure_breakdown, log_breakdown, stack_knobs
from servelab.report.drawing import STYLE, Chart, new_figure, render

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from servelab.analysis.analyze import VariantAnalysis
    from servelab.config.stack import StackSpec
    from servelab.report.base import ReportInput

# Colours: the baseline neutral, verdicts as traffic lights, the rest muted.
BASELINE_COLOUR = "#4c6a92"
VERDICT_COLOURS = {
    "better": "#2e9e5b",
    "worse": "#d0463b",
    "no significant difference": "#9aa7b8",
    "no difference": "#9aa7b8",
    "inconclusive": "#c9ccd1",
}
CAUSE_COLOURS = ("#d0463b", "#e8893a", "#d9b43c", "#8b5fbf", "#4aa3c7", "#7a7f87", "#b5548f")
PERCENTILE_STYLE = (  # (metric key, label, marker, colour)
    ("latency_p50_ms", "p50", "o", "#4c6a92"),
    ("latency_p90_ms", "p90", "s", "#2e9e5b"),
    ("latency_p99_ms", "p99", "^", "#e8893a"),
    ("latency_max_ms", "max", "x", "#d0463b"),
)
PANELS_PER_LINE = 4
RAMP_TITLE = "Latency and errors against the arrival rate"


class RampPoint(NamedTuple):
    """One step of a rate ramp: arrival rate (req/s), p99 latency (ms), failed share (0..1)."""

    rate: float
    p99_ms: float
    error_ratio: float


def _verdict(variant: VariantAnalysis, metric: str) -> str:
    """The variant's verdict on the answer's metric ``metric``, the one every output shows."""
    if variant.is_baseline:
        return "baseline"
    comparison = variant.comparisons.get(metric)
    return comparison.verdict if comparison is not None else "inconclusive"


def _colour(verdict: str) -> str:
    return BASELINE_COLOUR if verdict == "baseline" else VERDICT_COLOURS.get(verdict, "#9aa7b8")


def _variant_names(report: ReportInput) -> list[str]:
    """Variants that have runs, baseline first, in the experiment's order."""
    present = {v.variant for v in report.analysis.variants}
    return [s.name for s in report.experiment.stacks if s.name in present]


def _workload_names(report: ReportInput) -> list[str]:
    present = {v.workload for v in report.analysis.variants}
    return [w.name for w in report.experiment.workloads if w.name in present]


def _panel_grid(
    n_panels: int, n_rows: int, label_width: float, *, min_width: float = 10.0
) -> tuple[Figure, list[Axes]]:
    """A figure of ``n_panels`` sharing the variant axis (one row per variant), side by
    side, wrapped after PANELS_PER_LINE (a rate ramp may have dozens of workloads)."""
    columns = min(n_panels, PANELS_PER_LINE)
    lines = math.ceil(n_panels / columns)
    width = max(min_width, label_width + 3.4 * columns)
    height = lines * (1.0 + 0.32 * max(n_rows, 2)) + 0.4
    figure = new_figure(min(width, 16.0), height)
    with matplotlib.rc_context(STYLE):
        grid = figure.subplots(lines, columns, sharey=True, squeeze=False)
    axes = [ax for line in grid for ax in line]
    for spare in axes[n_panels:]:
        spare.set_visible(False)
    return figure, axes[:n_panels]


def _label_width(names: Sequence[str]) -> float:
    return 0.3 + 0.065 * max((len(n) for n in names), default=8)


def rps_chart(report: ReportInput) -> Chart:
    variants = _variant_names(report)
    workloads = _workload_names(report)
    figure, axes = _panel_grid(len(workloads), len(variants), _label_width(variants))
    with matplotlib.rc_context(STYLE):
        for ax, workload in zip(axes, workloads, strict=True):
            by_name = {v.variant: v for v in report.analysis.for_workload(workload)}
            for row, name in enumerate(variants):
                found = by_name.get(name)
                if found is None:
                    continue
                rps = found.metrics["rps"]
                mean = rps.summary.mean
                xerr = None
                if rps.interval is not None:
                    low, high = rps.interval
                    xerr = [[mean - max(low, 0.0)], [high - mean]]
                colour = _colour(_verdict(found, answer_metric(report.experiment).key))
                ax.barh(
                    row, mean, xerr=xerr, color=colour, height=0.65,
                    error_kw={"ecolor": "#222", "capsize": 3, "elinewidth": 1},
                )
                label = f"{mean:,.0f}"
                if rps.summary.n == 1:
                    label += " (1 run)"
                if found.total_errors:
                    label += f"  ⚠ {found.total_errors} errors"
                right = mean if xerr is None else mean + xerr[1][0]
                ax.text(right, row, f"  {label}", va="center", fontsize=7.5)
            ax.set_title(workload)
            ax.set_xlabel("requests/s (mean, 95 % CI)")
            ax.margins(x=0.3)
            ax.set_xlim(left=0)
            ax.grid(axis="x", alpha=0.3)
        axes[0].set_yticks(range(len(variants)), variants)
        axes[0].invert_yaxis()
        _verdict_legend(figure, report)
    return render(
        figure,
        "rps",
        "Requests per second",
        "Mean requests/s of each variant per workload; error bars are the 95 % confidence "
        "interval of the mean; the colour is the verdict against the baseline (by the test "
        "the report names).",
    )


def _verdict_legend(figure: Figure, report: ReportInput) -> None:
    from matplotlib.patches import Patch

    key = answer_metric(report.experiment).key
    seen = {_verdict(v, key) for v in report.analysis.variants}
    order = ["baseline", "better", "worse", "no significant difference", "inconclusive"]
    handles = [
        Patch(color=_colour(v), label=v)
        for v in order
        if v in seen or (v == "no significant difference" and "no difference" in seen)
    ]
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)


def latency_chart(report: ReportInput) -> Chart:
    variants = _variant_names(report)
    workloads = _workload_names(report)
    figure, axes = _panel_grid(len(workloads), len(variants), _label_width(variants))
    with matplotlib.rc_context(STYLE):
        for ax, workload in zip(axes, workloads, strict=True):
            by_name = {v.variant: v for v in report.analysis.for_workload(workload)}
            values: list[float] = []
            for row, name in enumerate(variants):
                found = by_name.get(name)
                if found is None:
                    continue
                points = [
                    sum(getattr(r.load, key) for r in found.runs) / len(found.runs)
                    for key, *_ in PERCENTILE_STYLE
                ]
                values += points
                ax.plot(points, [row] * len(points), color="#9aa7b8", lw=1, zorder=1)
                for x, (_, label, marker, colour) in zip(points, PERCENTILE_STYLE, strict=True):
                    ax.scatter(
                        [x], [row], marker=marker, color=colour, s=28, zorder=2,
                        label=label if row == 0 else None,
                    )
            positive = [v for v in values if v > 0]
            if positive and max(positive) / min(positive) > 30:
                ax.set_xscale("log")
            ax.set_title(workload)
            ax.set_xlabel("latency [ms] (mean over runs)")
            ax.grid(axis="x", alpha=0.3)
        axes[0].set_yticks(range(len(variants)), variants)
        axes[0].set_ylim(len(variants) - 0.5, -0.5)
        handles, labels = axes[0].get_legend_handles_labels()
        figure.legend(handles, labels, loc="outside lower center", ncols=4, frameon=False)
    return render(
        figure,
        "latency",
        "Latency percentiles",
        "p50, p90, p99 and maximum latency of each variant per workload, averaged over runs.",
    )


def grid_knobs(stacks: Sequence[StackSpec]) -> tuple[str, str] | None:
    """The two numeric knobs a grid varies (e.g. server.workers, server.threads), or None.

    Only when exactly two knobs differ between the stacks, both numeric, each
    with at least two values, and no two stacks share a combination.
    """
    if len(stacks) < 4:
        return None
    knobs = [stack_knobs(s) for s in stacks]
    varying = [k for k in knobs[0] if len({repr(kn.get(k)) for kn in knobs}) > 1]
    if len(varying) != 2:
        return None
    for key in varying:
        values = [kn[key] for kn in knobs]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            return None
    combos = {(kn[varying[0]], kn[varying[1]]) for kn in knobs}
    if len(combos) != len(stacks):
        return None
    return varying[0], varying[1]


def heatmap_chart(report: ReportInput, knobs: tuple[str, str]) -> Chart:
    x_key, y_key = knobs
    stacks = {s.name: stack_knobs(s) for s in report.experiment.stacks}
    xs = sorted({k[x_key] for k in stacks.values()})
    ys = sorted({k[y_key] for k in stacks.values()})
    workloads = _workload_names(report)
    width = min(16.0, 0.8 + (1.8 + 0.9 * len(xs)) * len(workloads))
    figure = new_figure(width, 1.5 + 0.65 * len(ys))
    x_label, y_label = x_key.rsplit(".", 1)[-1], y_key.rsplit(".", 1)[-1]
    with matplotlib.rc_context(STYLE):
        axes = figure.subplots(1, len(workloads), squeeze=False)[0]
        for ax, workload in zip(axes, workloads, strict=True):
            matrix = [[math.nan] * len(xs) for _ in ys]
            errors = [[0] * len(xs) for _ in ys]
            for found in report.analysis.for_workload(workload):
                knob = stacks[found.variant]
                row, col = ys.index(knob[y_key]), xs.index(knob[x_key])
                matrix[row][col] = found.metrics["rps"].summary.mean
                errors[row][col] = found.total_errors
            image = ax.imshow(matrix, cmap="viridis", origin="lower", aspect="auto")
            finite = [v for line in matrix for v in line if not math.isnan(v)]
            middle = (min(finite) + max(finite)) / 2 if finite else 0
            for row, line in enumerate(matrix):
                for col, value in enumerate(line):
                    if math.isnan(value):
                        continue
                    text = f"{value:,.0f}" + ("\n⚠ errors" if errors[row][col] else "")
                    ax.text(
                        col, row, text, ha="center", va="center", fontsize=7.5,
                        color="white" if value < middle else "black",
                    )
            ax.set_xticks(range(len(xs)), [str(x) for x in xs])
            ax.set_yticks(range(len(ys)), [str(y) for y in ys])
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label)
            ax.set_title(workload)
            ax.spines[:].set_visible(False)
            figure.colorbar(image, ax=ax, label="requests/s", shrink=0.9)
    return render(
        figure,
        "heatmap",
        f"Requests per second: {x_label} × {y_label}",
        f"Mean requests/s for every combination of {x_key} and {y_key}, per workload.",
    )


def errors_chart(report: ReportInput) -> Chart:
    variants = _variant_names(report)
    by_variant = {
        name: [r for r in report.runs if r.variant == name] for name in variants
    }
    failures = {name: failure_breakdown(runs) for name, runs in by_variant.items()}
    logs = {name: log_breakdown(runs) for name, runs in by_variant.items()}
    has_logs = any(logs.values())
    panels = [("Failed requests by cause", failures)]
    if has_logs:
        panels.append(("Classified log lines", logs))
    figure, axes = _panel_grid(len(panels), len(variants), _label_width(variants))
    total_requests = sum(r.load.requests_total for r in report.runs)
    with matplotlib.rc_context(STYLE):
        for ax, (title, counts) in zip(axes, panels, strict=True):
            causes = sorted({c for per in counts.values() for c in per})
            colours = {c: CAUSE_COLOURS[i % len(CAUSE_COLOURS)] for i, c in enumerate(causes)}
            for row, name in enumerate(variants):
                left = 0
                for cause in causes:
                    n = counts[name].get(cause, 0)
                    if n:
                        ax.barh(
                            row, n, left=left, color=colours[cause], height=0.65,
                            label=cause if cause not in ax.get_legend_handles_labels()[1] else None,
                        )
                        left += n
                if counts is failures and causes:
                    requests = sum(r.load.requests_total for r in by_variant[name])
                    share = 100 * left / requests if requests else 0.0
                    ax.text(left, row, f"  {left:,} of {requests:,} ({share:.2f} %)", va="center",
                            fontsize=7.5)
            if not causes:
                ax.text(
                    0.5, 0.5,
                    f"No failed requests\nin {total_requests:,} requests over all runs"
                    if counts is failures else "No classified log lines",
                    transform=ax.transAxes, ha="center", va="center", fontsize=10, color="#2e9e5b",
                )
                ax.set_xticks([])
            else:
                ax.legend(loc="lower right", fontsize=7.5, frameon=False)
                ax.margins(x=0.35)
            ax.set_xlim(left=0)
            ax.set_title(title)
            ax.set_xlabel("requests (all workloads and runs)" if counts is failures else "lines")
        axes[0].set_yticks(range(len(variants)), variants)
        axes[0].set_ylim(len(variants) - 0.5, -0.5)
    return render(
        figure,
        "errors",
        "Errors and their causes",
        "Failed requests of each variant (all workloads and runs) by cause: HTTP status of "
        "the answer, or the kind of connection error when there was none"
        + ("; and the proxy/app log lines classified during the runs." if has_logs else "."),
    )


def ramp_points(report: ReportInput) -> dict[str, list[RampPoint]]:
    """Per variant, (rate, p99, error ratio) of each open-model workload, by rate.

    Empty unless the experiment has open-model workloads at two or more rates.
    """
    rates = {
        w.name: float(w.load.rate)
        for w in report.experiment.workloads
        if w.load.model == "open" and w.load.rate is not None
    }
    if len(set(rates.values())) < 2:
        return {}
    series: dict[str, list[RampPoint]] = {}
    for name in _variant_names(report):
        points = []
        for workload, rate in rates.items():
            runs = [r for r in report.runs if r.variant == name and r.workload == workload]
            if not runs:
                continue
            total = sum(r.load.requests_total for r in runs)
            errors = sum(r.load.errors for r in runs)
            p99 = sum(r.load.latency_p99_ms for r in runs) / len(runs)
            points.append(RampPoint(rate, p99, errors / total if total else 0.0))
        if points:
            series[name] = sorted(points)
    return series


PointLike = tuple[float, float, float]


def ramp_chart(
    series: Mapping[str, Sequence[PointLike]] | Sequence[PointLike],
    *,
    p99_limit_ms: float | None = None,
    max_error_ratio: float | None = None,
    name: str = "ramp",
    shaded: Mapping[str, tuple[float, float]] | None = None,
    joined: bool = True,
    title: str | None = None,
) -> Chart:
    """p99 latency and error ratio against the arrival rate.

    ``series``: a list of (rate req/s, p99 ms, error ratio 0..1) points, or a
    mapping of series name (a variant) to such lists. Limits, when given, are
    drawn as dashed lines (an SLO); the first rate with errors is marked.
    ``shaded``: per series, a band of rates shaded in its colour (a capacity's
    interval); ``joined``: points joined by lines (a ramp's steps), else marked alone
    (a search's trials, repeated and out of order).
    """
    given = dict(series) if isinstance(series, Mapping) else {"": list(series)}
    named = {k: sorted(RampPoint(*p) for p in v) for k, v in given.items() if v}
    if not named:
        raise ValueError("a ramp chart needs at least one point")
    figure = new_figure(9.0, 5.4)
    with matplotlib.rc_context(STYLE):
        top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=[3, 2])
        first_error: float | None = None
        all_p99: list[float] = []
        for index, (label, points) in enumerate(named.items()):
            colour = CAUSE_COLOURS[(index + 4) % len(CAUSE_COLOURS)] if len(named) > 1 else (
                BASELINE_COLOUR
            )
            rates = [p.rate for p in points]
            style = "-" if joined else "none"
            top.plot(rates, [p.p99_ms for p in points], marker="o", color=colour,
                     label=label or None, linestyle=style)
            bottom.plot(rates, [100 * p.error_ratio for p in points], marker="o", color=colour,
                        label=label or None, linestyle=style)
            band = (shaded or {}).get(label)
            if band is not None:
                for ax in (top, bottom):
                    ax.axvspan(*band, color=colour, alpha=0.15, lw=0)
            all_p99 += [p.p99_ms for p in points]
            erring = [p.rate for p in points if p.error_ratio > 0]
            if erring and (first_error is None or min(erring) < first_error):
                first_error = min(erring)
        positive = [v for v in all_p99 if v > 0]
        if positive and max(positive) / min(positive) > 30:
            top.set_yscale("log")
        if p99_limit_ms is not None:
            top.axhline(p99_limit_ms, ls="--", color="#d0463b", lw=1,
                        label=f"p99 limit {p99_limit_ms:g} ms")
        if max_error_ratio is not None:
            bottom.axhline(100 * max_error_ratio, ls="--", color="#d0463b", lw=1,
                           label=f"error limit {100 * max_error_ratio:g} %")
        if first_error is not None:
            for ax in (top, bottom):
                ax.axvline(first_error, ls=":", color="#7a7f87", lw=1)
            bottom.annotate(
                f"first errors at {first_error:,.0f} req/s", (first_error, 0),
                xytext=(-4, 6), textcoords="offset points", ha="right", fontsize=7.5,
                color="#7a7f87",
            )
        top.set_ylabel("p99 latency [ms]")
        top.set_title(title or RAMP_TITLE)
        bottom.set_ylabel("failed requests [%]")
        bottom.set_xlabel("arrival rate [requests/s]")
        bottom.set_ylim(bottom=0)
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[1]:
                ax.legend(fontsize=7.5, frameon=False)
    return render(
        figure,
        name,
        title or RAMP_TITLE,
        "p99 latency (top) and the share of failed requests (bottom) at each fixed arrival "
        "rate (open model: latency counted from each request's scheduled send time)"
        + ("; shaded: each variant's capacity interval." if shaded else "."),
    )


@dataclass(frozen=True)
class PlannedChart:
    """A chart that fits the result, before drawing it (drawing takes ~0.2 s)."""

    name: str
    title: str
    draw: Callable[[], Chart] = field(repr=False, compare=False)


def plan_charts(report: ReportInput) -> list[PlannedChart]:
    """Every chart that fits the result, in the order the reports show them."""
    plan = [
        PlannedChart("rps", "Requests per second", lambda: rps_chart(report)),
        PlannedChart("latency", "Latency percentiles", lambda: latency_chart(report)),
    ]
    knobs = grid_knobs(report.experiment.stacks)
    if knobs is not None:
        x_label, y_label = (k.rsplit(".", 1)[-1] for k in knobs)
        plan.append(
            PlannedChart(
                "heatmap",
                f"Requests per second: {x_label} × {y_label}",
                lambda: heatmap_chart(report, knobs),
            )
        )
    ramp = ramp_points(report)
    if ramp:
        slo = report.experiment.slo  # a ramp's SLO, where it has one
        p99_limit_ms = slo.p99_ms if slo else None
        max_error_ratio = slo.max_error_ratio if slo else None
        plan.append(
            PlannedChart(
                "ramp",
                RAMP_TITLE,
                lambda: ramp_chart(
                    ramp, p99_limit_ms=p99_limit_ms, max_error_ratio=max_error_ratio
                ),
            )
        )
    plan.append(PlannedChart("errors", "Errors and their causes", lambda: errors_chart(report)))
    return plan


def build_charts(report: ReportInput) -> list[Chart]:
    return [planned.draw() for planned in plan_charts(report)]
