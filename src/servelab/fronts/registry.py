"""Every front servelab can put before an app server: kind -> "module:Class", imported
when first used. Adding a front is one module and one line here."""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servelab.fronts.base import Front

FRONTS: dict[str, str] = {
    "none": "servelab.fronts.none:NoFront",
    "nginx": "servelab.fronts.nginx:Nginx",
    "apache": "servelab.fronts.apache:Apache",
}
FRONT_KINDS = tuple(FRONTS)
NO_FRONT = "none"
DEFAULT_FRONT = "nginx"
# The fronts that run a process of their own (and have a version to record).
PROCESS_FRONTS = tuple(kind for kind in FRONTS if kind != NO_FRONT)


@cache
def get_front(kind: str) -> Front:
    """The front of ``kind`` (KeyError for an unknown kind: spec validation says which)."""
    module, _, name = FRONTS[kind].partition(":")
    return getattr(importlib.import_module(module), name)()
