"""Jinja2 templates of the configuration files servelab writes for its servers.

Rendering is strict (an undefined variable is an error, not an empty string).
Two filters quote values for the target language: ``py`` (a Python literal,
for gunicorn.conf.py) and ``nginx`` (a double-quoted nginx string).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2


def nginx_quote(value: object) -> str:
    """``value`` as a double-quoted nginx string (paths may hold spaces)."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("servelab.host", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # config files, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["py"] = repr
    env.filters["nginx"] = nginx_quote
    return env


def render(name: str, **context: Any) -> str:
    """The template ``name`` of this directory rendered with ``context``."""
    return _environment().get_template(name).render(**context)
