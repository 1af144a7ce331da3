"""The HTML report: one self-contained page (inline CSS, inline SVG charts).

Nothing is fetched: no script, stylesheet, font or image from anywhere, so
the file can be mailed, attached to a CI run, or opened offline years later.
Every kind of section (report/sections.py) is a macro of
``templates/sections.html.j2`` named by the section's kind; the page around
them is ``templates/report.html.j2``. Autoescaping is on; the only markup
inserted unescaped is matplotlib's SVG output.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import jinja2

from servelab.report.base import CHARTS_DIR, RUNS_CSV_FILE, RUNS_JSON_FILE, Section
from servelab.report.sections import TitleSection

if TYPE_CHECKING:  # matplotlib is an extra: the report without charts imports this module
    from servelab.report.drawing import Chart


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("servelab.report", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@cache
def section_macros() -> Any:
    """The macros of templates/sections.html.j2, as attributes named by section kind."""
    template = _environment().get_template("sections.html.j2")
    return template.make_module(
        {"runs_json": RUNS_JSON_FILE, "runs_csv": RUNS_CSV_FILE, "charts_dir": CHARTS_DIR}
    )


def render_html(sections: Sequence[Section]) -> str:
    macros = section_macros()
    parts = []
    for section in sections:
        macro = getattr(macros, section.kind, None)
        if macro is None:
            raise TypeError(f"no HTML for the {type(section).__name__}")
        parts.append(macro(section))
    title = next(s.name for s in sections if isinstance(s, TitleSection))
    return _environment().get_template("report.html.j2").render(title=title, parts=parts)


def standalone_page(
    title: str, figures: Sequence[tuple[Chart, str]], text: str,
    links: Sequence[tuple[str, str]] = (),
) -> str:
    """A page of its own, not a report: each chart inline with its caption, ``links``
    ((href, text): files beside the page), then ``text`` (a markdown summary) as it is; no
    script and nothing fetched, so it opens offline (capacity.html, history.html)."""
    import html

    shown = "".join(
        f"<figure>{chart.inline_svg}<figcaption>{html.escape(caption)}</figcaption></figure>"
        for chart, caption in figures
    )
    if links:
        shown += "<ul>" + "".join(
            f'<li><a href="{html.escape(href)}">{html.escape(said)}</a></li>'
            for href, said in links
        ) + "</ul>"
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;margin:2em;"
        "max-width:75em}svg{max-width:100%;height:auto}pre{white-space:pre-wrap}</style>"
        f"</head><body>{shown}<pre>{html.escape(text)}</pre></body></html>\n"
    )
