"""How a chart becomes SVG text and PNG bytes: matplotlib without pyplot, in one style.

matplotlib's object API (``Figure``) is used without pyplot: no global state, no GUI
backend, nothing that needs a display; PNGs come from its Agg renderer. ``render`` gives
the same SVG for the same figure (the date metadata is dropped and the ids matplotlib
generates are salted with the chart's name, which also keeps them unique when several
SVGs are inlined in one HTML page). The result's charts (``servelab.report.charts``) and
tune's race chart are drawn with it.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import matplotlib
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

STYLE: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",  # text stays text: selectable, small, scaled by the browser
    "font.family": ["DejaVu Sans"],  # ships with matplotlib: the same text everywhere
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
PNG_DPI = 110


@dataclass(frozen=True)
class Chart:
    """One rendered chart: ``name`` is the file stem (``rps`` -> rps.svg, rps.png)."""

    name: str
    title: str
    description: str  # what it shows, for the HTML caption and the image's alt text
    svg: str
    png: bytes

    @property
    def inline_svg(self) -> str:
        """The SVG element alone (no XML prolog or doctype), to embed in HTML, with its
        ids prefixed by the chart's name: matplotlib numbers them the same way in every
        figure (axes_1, clip paths), and ids must be unique in a page."""
        svg = self.svg[self.svg.index("<svg") :]
        prefix = f"{self.name}-"
        svg = re.sub(r'\bid="', f'id="{prefix}', svg)
        svg = svg.replace("url(#", f"url(#{prefix}")
        return re.sub(r'(\bxlink:href|\bhref)="#', rf'\1="#{prefix}', svg)


def render(figure: Figure, name: str, title: str, description: str) -> Chart:
    """SVG and PNG of ``figure``, deterministic for the same figure and ``name``."""
    with matplotlib.rc_context({**STYLE, "svg.hashsalt": f"servelab-{name}"}):
        svg = io.StringIO()
        figure.savefig(svg, format="svg", metadata={"Date": None})
        png = io.BytesIO()
        figure.savefig(png, format="png", dpi=PNG_DPI, metadata={"Software": None})
    return Chart(name, title, description, svg.getvalue(), png.getvalue())


def new_figure(width: float, height: float) -> Figure:
    """An empty figure of ``width`` × ``height`` inches in the charts' style."""
    with matplotlib.rc_context(STYLE):
        return Figure(figsize=(width, height), layout="constrained")
