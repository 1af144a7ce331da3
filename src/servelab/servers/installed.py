"""Clear errors for an app server's program that is missing from the app's Python."""

from __future__ import annotations

import shutil
from pathlib import Path

from servelab.errors import SpecError


def require_script(name: str, python: str) -> str:
    """The path of console script ``name``: beside the app's Python first, then on PATH."""
    beside = Path(python).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise SpecError(
            f"app server {name} is not installed (no {beside}, none on PATH)",
            f"{python} -m pip install {name}",
        )
    return found
