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


def find_program(name: str) -> str | None:
    """``name`` on PATH, else in servelab's cache (where `make setup` builds oha)."""
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


# The toxiproxy release scripts/setup.sh builds (a TCP proxy that slows the database link).
TOXIPROXY_VERSION = "2.12.0"


def toxiproxy_server() -> tuple[str, str | None] | None:
    """(path, version) of toxiproxy's server, or None.

    The build setup.sh leaves in the cache (``go/bin/toxiproxy-server-v<version>``,
    whose own ``-version`` says only "git") comes first, then ``toxiproxy-server``
    on PATH (version None: ask the program).
    """
    cached = cache_dir() / "go" / "bin" / f"toxiproxy-server-v{TOXIPROXY_VERSION}"
    if os.access(cached, os.X_OK):
        return str(cached), TOXIPROXY_VERSION
    found = shutil.which("toxiproxy-server")
    return (found, None) if found else None
