"""Every front servelab can put before an app server; adding a front is one module and one
line here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab.registry import Registry

if TYPE_CHECKING:
    from servelab.fronts.base import Front

FRONTS: Registry[Front] = Registry(
    "front",
    {
        "none": "servelab.fronts.none:NoFront",
        "nginx": "servelab.fronts.nginx:Nginx",
        "apache": "servelab.fronts.apache:Apache",
    },
)
FRONT_KINDS = FRONTS.names
NO_FRONT = "none"
DEFAULT_FRONT = "nginx"
# The fronts that run a process of their own (and have a version to record).
PROCESS_FRONTS = tuple(kind for kind in FRONT_KINDS if kind != NO_FRONT)
get_front = FRONTS.get
