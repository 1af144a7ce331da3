"""The rate over time in one line of text (▁▂▃▄▅▆▇█), for the terminal: the shape of a
day (night trough, afternoon peak, a burst) seen before any chart is opened."""

from __future__ import annotations

from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"


def resample(values: Sequence[float], width: int) -> list[float]:
    """``values`` in at most ``width`` points, each the mean of its share of them (a mean,
    not a maximum: the line shows the rate, and the peak is said beside it). Fewer values
    than ``width`` are kept as they are."""
    if width < 1:
        raise ValueError(f"width must be 1 or more, got {width}")
    n = len(values)
    if n <= width:
        return list(values)
    points = []
    for i in range(width):
        start, end = i * n // width, (i + 1) * n // width
        points.append(sum(values[start:end]) / (end - start))
    return points


def sparkline(values: Sequence[float], width: int = 60) -> str:
    """``values`` (rates, 0 or more) as bars, resampled to ``width`` characters: the
    lowest bar is zero, the highest the largest value, so quiet and busy stay apart."""
    points = resample(values, width)
    top = max(points, default=0.0)
    if top <= 0:
        return BARS[0] * len(points)
    last = len(BARS) - 1
    return "".join(BARS[min(last, max(0, round(v / top * last)))] for v in points)
