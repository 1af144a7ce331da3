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

from servelab.errors import ServelabError, SpecError


def unwritable(path: Path, *, directory: bool = False) -> str | None:
    """Why ``path`` (a file; with ``directory``, a directory made if need be) could not be
    written, or None. Tried by creating and removing a file where it would go: root
    passes every permission check, yet not a read-only or virtual file system (/proc)."""
    if directory:
        if path.exists() and not path.is_dir():
            return "it is not a directory"
        place = path
        while not place.exists() and place != place.parent:
            place = place.parent
    else:
        if path.is_dir():
            return "it is a directory"
        place = path.parent
        if path.exists() and not os.access(path, os.W_OK):
            return "the file is not writable"
    if not place.is_dir():
        return f"{place} is not a directory" if place.exists() else f"{place} does not exist"
    try:
        handle, probe = tempfile.mkstemp(prefix=".servelab-probe-", dir=place)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(handle)
    os.unlink(probe)
    return None


def check_writable_path(path: Path, option: str, *, directory: bool = False) -> None:
    """SpecError (one line naming ``option``) unless servelab can write ``path``: called
    before anything starts, so a bad output path never costs a measurement."""
    reason = unwritable(path, directory=directory)
    if reason is not None:
        raise SpecError(
            f"{option} {path}: cannot write there ({reason})",
            "give a directory you can write to" if directory
            else "give a file in an existing, writable directory",
        )


def check_out_dir(out_dir: Path, *, force: bool, option: str = "--out") -> None:
    """Refuse a target that is a file, one that cannot be written, or a directory with
    something in it (unless ``force``)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ServelabError(
            f"{out_dir} exists and is not a directory", f"choose another {option} directory"
        )
    check_writable_path(out_dir, option, directory=True)
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
