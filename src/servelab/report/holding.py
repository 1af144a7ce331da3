"""The holding curve as a picture: each trial held (top) or broke (bottom) at its rate,
the fitted chance that a trial holds, the planning share as a line, and the two points
(the rate held in that share of trials and in half of them) marked. capacity.md's
picture of where a stack holds, breaks, or does either by chance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # matplotlib is the charts extra: imported where a chart is drawn
    from servelab.report.drawing import Chart


@dataclass(frozen=True)
class HoldingSeries:
    """One variant's trials (rate, held) and, once fitted, its curve (rate, P(hold)) and
    the rates held in the planning share and in half of the trials."""

    trials: Sequence[tuple[float, bool]]
    curve: Sequence[tuple[float, float]] = ()
    hold_rate: float | None = None
    half_rate: float | None = None


def holding_chart(
    series: Mapping[str, HoldingSeries], share: float, *, unit: str = "req/s",
    name: str = "capacity-curve", title: str | None = None,
) -> Chart:
    """P(hold) against the rate, a panel for all the variants, trials jittered a little
    about 1 (held) and 0 (broke) so that repeated rates stay visible."""
    import matplotlib

    from servelab.report.charts import BASELINE_COLOUR, CAUSE_COLOURS
    from servelab.report.drawing import STYLE, new_figure, render

    if not any(s.trials for s in series.values()):
        raise ValueError("a holding chart needs at least one trial")
    figure = new_figure(9.0, 4.6)
    with matplotlib.rc_context(STYLE):
        ax = figure.subplots()
        for index, (label, s) in enumerate(series.items()):
            colour = CAUSE_COLOURS[(index + 4) % len(CAUSE_COLOURS)] if len(series) > 1 else (
                BASELINE_COLOUR
            )
            jitter = [0.015 * ((i * 7) % 5 - 2) for i in range(len(s.trials))]
            ax.scatter([r for r, _ in s.trials],
                       [(1.0 if held else 0.0) + j for (_, held), j in zip(s.trials, jitter,
                                                                           strict=True)],
                       color=colour, marker="o", s=18, alpha=0.8, label=label or None)
            if s.curve:
                ax.plot([r for r, _ in s.curve], [p for _, p in s.curve], color=colour)
            for rate, marker in ((s.hold_rate, "v"), (s.half_rate, "^")):
                if rate is not None:
                    ax.axvline(rate, color=colour, linestyle=":", linewidth=1)
                    ax.plot([rate], [share if marker == "v" else 0.5], marker=marker,
                            color=colour, markersize=7)
        ax.axhline(share, color="#555555", linestyle="--", linewidth=1)
        ax.text(ax.get_xlim()[0], share, f" held in {100 * share:g} % of trials",
                va="bottom", fontsize=8, color="#555555")
        ax.set_ylim(-0.1, 1.1)
        ax.set_xlabel(f"rate [{unit}]")
        ax.set_ylabel("P(a trial holds the SLO)")
        if len(series) > 1:
            ax.legend(loc="lower left")
        ax.set_title(title or "Holding curve: trials held (1) and broken (0), the fitted chance")
    return render(
        figure, name, title or "Holding curve",
        "Each trial held (near 1) or broke (near 0) at its rate; the line is the fitted "
        f"chance that a trial holds; the dashed line is {100 * share:g} %, and the dotted "
        "lines the rates held in that share of trials and in half of them.",
    )
