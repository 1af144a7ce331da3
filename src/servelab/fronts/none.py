"""No front: the load driver connects to the app server itself (over TCP)."""

from __future__ import annotations

from servelab.config.stack import ProxySpec
from servelab.plugins.front import Front


class NoFront(Front):
    kind = "none"
    protocols = frozenset({"http"})

    def describe(self, proxy: ProxySpec) -> str:
        return ""
