"""Where servelab keeps its cache (built tools) and finds external programs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from servelab.errors import MissingToolError


def cache_dir() -> Path:
    """$SERVELAB_CACHE, else $XDG_CACHE_HOME/servelab, else ~/.cache/servelab."""
    if os.environ.get("SERVELAB_CACHE"):
        return Path(os.environ["SERVELAB_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "servelab"


def go_tool_path(name: str) -> Path:
    """Where `servelab setup` leaves a tool it builds with go (its name carries its
    version or source hash: a changed pin is built anew, never run as an old binary)."""
    return cache_dir() / "go" / "bin" / name


def find_program(name: str) -> str | None:
    """``name`` on PATH, else in servelab's cache (where `servelab setup` builds oha)."""
    found = shutil.which(name)
    if found:
        return found
    cached = cache_dir() / "cargo" / "bin" / name
    return str(cached) if os.access(cached, os.X_OK) else None


def require_program(name: str, fix: str) -> str:
    path = find_program(name)
    if path is None:
        raise MissingToolError(f"{name} is not installed (not on PATH nor in {cache_dir()})", fix)
    return path


def toxiproxy_server() -> tuple[str, str | None] | None:
    """(path, version) of toxiproxy's server, or None.

    The build `servelab setup --with toxiproxy` leaves in the cache
    (``go/bin/toxiproxy-server-v<version>``, whose own ``-version`` says only "git")
    comes first, then ``toxiproxy-server`` on PATH (version None: ask the program).
    """
    from servelab.host.parts import TOXIPROXY_VERSION

    cached = go_tool_path(f"toxiproxy-server-v{TOXIPROXY_VERSION}")
    if os.access(cached, os.X_OK):
        return str(cached), TOXIPROXY_VERSION
    found = shutil.which("toxiproxy-server")
    return (found, None) if found else None
