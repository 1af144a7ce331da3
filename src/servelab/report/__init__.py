"""Renderers of results: one module per format.

``base.ReportInput`` is a stored result with its analysis; every renderer
(``base.Renderer``: ``write(report, out_dir) -> paths``) reads only that:
``markdown``, ``html`` (one self-contained page), ``charts`` (matplotlib SVG
and PNG), ``data`` (JSON and CSV of every run). ``files.write_report`` writes
them all, ``browser`` opens the HTML in headless Chromium. ``tables`` and
``failures`` build the seed-style and failure tables the terminal shows too.
"""
