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
