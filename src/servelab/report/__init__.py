"""Reports of results: their sections built once, then one module per format.

``base.ReportInput`` is a stored result with its analysis; ``sections``
turns it into the report's ordered sections (data, not text), built from the
subject modules (``answer``, ``tables``, ``failures``, ``memory``, ``timing``,
``method``, ``charts``). Every format (``base.Renderer``) renders every kind
of section: ``markdown``, ``html`` (one self-contained page), ``terminal``
(rich). ``files.write_report`` writes a report directory (markdown, HTML,
chart SVG and PNG files, ``data``'s JSON and CSV of every run), ``browser``
opens the HTML in headless Chromium.
"""
