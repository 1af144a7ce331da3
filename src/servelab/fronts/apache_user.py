"""Who Apache's children are, and what they may read and write: started as root, Apache's
children (and mod_wsgi's daemons, which refuse to run as root) switch to ``www-data``
(``run_as``); the Django app's SQLite directory is handed to its group
(``open_database``), and mod_wsgi's daemons must read the app's Python and venv
(``check_daemon_access`` says so before starting, naming the fix)."""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from servelab.apps.interpreter import python_facts
from servelab.errors import MissingToolError, StackStartError

RUN_USER = "www-data"


@dataclass(frozen=True)
class RunAs:
    """The user and group Apache's children switch to (when started as root)."""

    user: str
    group: str
    uid: int
    gid: int


def run_as() -> RunAs | None:
    """www-data when servelab is root (Apache's children never run as root), else None."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(RUN_USER)
    except KeyError:
        raise MissingToolError(
            f"user {RUN_USER} does not exist; Apache's children need it",
            "install apache2 (its package creates www-data)",
        ) from None
    return RunAs(RUN_USER, grp.getgrgid(entry.pw_gid).gr_name, entry.pw_uid, entry.pw_gid)


def open_to(path: Path, who: RunAs | None, mode: int) -> None:
    """Give ``who``'s group ``mode`` on ``path`` (group = who's group); no-op when not root."""
    if who is None:
        return
    os.chown(path, -1, who.gid)
    os.chmod(path, mode)


SQLITE_ENV = "SERVELAB_DJANGO_SQLITE"  # servelab.apps.django_app.settings
SQLITE_DIR_PREFIX = "servelab-sqlite-"  # userapp.app_database's temp dir


def open_database(env: dict[str, str], who: RunAs | None) -> None:
    """Let mod_wsgi's daemons (``who``) write the Django app's SQLite file, if it has one.

    Only in the private directory servelab made for it (``servelab-sqlite-*``, see
    userapp.app_database); a file elsewhere is left alone (its directory may be
    shared, /tmp itself) and must already be readable by ``who``.
    """
    db = env.get(SQLITE_ENV)
    if who is None or not db or env.get("SERVELAB_DJANGO_DB", "sqlite") != "sqlite":
        return
    path = Path(db)
    if not path.exists():
        return
    if not path.parent.name.startswith(SQLITE_DIR_PREFIX) or path.parent.is_symlink():
        check_daemon_access(who, [path])
        return
    open_to(path.parent, who, 0o770)  # SQLite creates its journal beside the file
    for extra in (path, *(path.with_name(path.name + s) for s in ("-journal", "-wal", "-shm"))):
        if extra.exists():
            open_to(extra, who, 0o660)


def check_daemon_access(who: RunAs | None, paths: list[Path]) -> None:
    """StackStartError unless ``who`` can read every path (mod_wsgi daemons run as it)."""
    if who is None:
        return
    argv = ["/bin/sh", "-c", 'for p; do [ -r "$p" ] || { echo "$p"; exit 1; }; done', "sh"]
    done = subprocess.run(
        [*argv, *map(str, paths)], user=who.uid, group=who.gid, extra_groups=[],
        capture_output=True, text=True, timeout=10, check=False, stdin=subprocess.DEVNULL,
    )
    if done.returncode == 0:
        return
    blocked = done.stdout.strip() or "one of " + ", ".join(map(str, paths))
    top = _first_closed_dir(Path(blocked))
    raise StackStartError(
        f"mod_wsgi's daemon processes run as {who.user}, which cannot read {blocked}"
        + (f" ({top} is closed to it)" if top else ""),
        "`servelab setup --with apache` lets it traverse to servelab's Python (undo: "
        f"servelab setup --undo-acl), or `setfacl -m u:{who.user}:x {top or '<dir>'}` "
        f"(undo: setfacl -x u:{who.user} {top or '<dir>'})",
    )


def python_paths(python: Path | None = None) -> list[Path]:
    """What mod_wsgi's daemons read of the app's Python (None: servelab's): its stdlib
    and the venv."""
    if python is None:
        stdlib, purelib = sysconfig.get_path("stdlib"), sysconfig.get_path("purelib")
    else:
        facts = python_facts(str(python))
        stdlib, purelib = facts.stdlib, facts.purelib
    return [Path(stdlib) / "os.py", Path(purelib)]


def _first_closed_dir(path: Path) -> Path | None:
    """The outermost directory above ``path`` that others cannot search (0700 /root...)."""
    for parent in reversed(path.parents):
        try:
            if not parent.stat().st_mode & 0o001:
                return parent
        except OSError:
            return parent
    return None
