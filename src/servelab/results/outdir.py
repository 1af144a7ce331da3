"""Writing a set of files into a directory the user named, never overwriting silently.

Files are written into a fresh staging directory beside the target first;
only when every one of them was written are they moved into place. So a
failure half-way leaves the target as it was, and an existing, non-empty
target is refused unless ``force`` is given (then only the files of the new
set are replaced; nothing else in the directory is touched or removed).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from servelab.errors import ServelabError


def check_out_dir(out_dir: Path, *, force: bool, option: str = "--out") -> None:
    """Refuse a target that is a file, or a directory with something in it (unless ``force``)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ServelabError(
            f"{out_dir} exists and is not a directory", f"choose another {option} directory"
        )
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force:
        raise ServelabError(
            f"output directory {out_dir} exists and is not empty",
            f"choose a new {option} directory, or pass --overwrite to replace the files "
            "servelab writes there",
        )


def _move_into(staging: Path, out_dir: Path) -> None:
    for source in sorted(staging.rglob("*")):
        if source.is_dir():
            continue
        target = out_dir / source.relative_to(staging)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)


@contextmanager
def staged_output(out_dir: Path, *, force: bool, option: str = "--out") -> Iterator[Path]:
    """A staging directory to write into; its files land in ``out_dir`` when the block succeeds."""
    check_out_dir(out_dir, force=force, option=option)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    try:
        yield staging
        out_dir.mkdir(exist_ok=True)
        _move_into(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
