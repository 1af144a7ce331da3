"""Clear errors for an app server that is not installed in servelab's environment."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

from servelab.errors import SpecError

_HINT = "run scripts/setup.sh, or pip install the server into servelab's venv"


def require_module(name: str) -> None:
    """SpecError unless the Python module ``name`` is importable here."""
    if importlib.util.find_spec(name) is None:
        raise SpecError(f"app server {name} is not installed ({sys.executable})", _HINT)


def require_script(name: str) -> str:
    """The path of console script ``name``: next to this Python first, then on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise SpecError(f"app server {name} is not installed (no {beside}, none on PATH)", _HINT)
    return found
