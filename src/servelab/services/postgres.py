"""servelab's own PostgreSQL: a fresh cluster in a temp dir, on a free loopback port.

``run_postgres`` finds Debian's server binaries (/usr/lib/postgresql/<ver>/bin),
runs ``initdb`` into a new temp directory, starts ``postgres`` in the
foreground as a ManagedProcess (its own process group, registered with the
janitor, as is the directory) listening on 127.0.0.1 and on a unix socket in
the same directory, creates the database, and on the way out stops the server
(fast shutdown, then the group is killed) and removes the directory.

PostgreSQL refuses to run as root, so when servelab is root the cluster is
owned by, and the server runs as, the ``postgres`` system user the Debian
package creates (``setpriv`` switches user at exec, so the process group and
the pid are the server's own).

Given a network namespace (``namespace``, e.g. the far end of a netem link,
see servelab.services.slowlink), the server runs inside it and also listens on
``listen_host``, the namespace's address the host reaches it on; its unix
socket, in the cluster's directory, reaches it directly from anywhere.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from servelab.errors import MissingToolError, StackStartError
from servelab.host.procs import JANITOR, OWNER_ENV, ManagedProcess, free_port

if TYPE_CHECKING:
    from servelab.host.netns import NetNamespace

PG_ROOT = Path("/usr/lib/postgresql")
DB_USER = "servelab"
DB_NAME = "servelab"
RUN_AS = "postgres"  # when servelab runs as root
LOG_NAME = "postgres.log"


@dataclass(frozen=True)
class PostgresServer:
    """A running cluster: where to connect, as whom, and its files."""

    host: str  # 127.0.0.1, or the namespace's address
    port: int
    socket_dir: Path
    dbname: str
    user: str
    workdir: Path  # data directory, socket and log live here
    version: str
    process: ManagedProcess

    @property
    def conninfo(self) -> str:
        return f"host={self.host} port={self.port} dbname={self.dbname} user={self.user}"

    def django_env(self, host: str | None = None, port: int | None = None) -> dict[str, str]:
        """The environment the Django reference app reads its database settings from;
        ``host``/``port`` replace the server's (a slow link's address, or the socket dir)."""
        return {
            "SERVELAB_DJANGO_DB": "postgresql",
            "SERVELAB_PG_HOST": host or self.host,
            "SERVELAB_PG_PORT": str(port or self.port),
            "SERVELAB_PG_NAME": self.dbname,
            "SERVELAB_PG_USER": self.user,
        }


def find_bindir() -> Path:
    """The newest installed PostgreSQL's bin directory, or MissingToolError."""
    found = [
        d / "bin"
        for d in PG_ROOT.glob("*")
        if re.fullmatch(r"\d+", d.name) and (d / "bin" / "initdb").is_file()
    ]
    if not found:
        raise MissingToolError(
            f"PostgreSQL's server is not installed (no {PG_ROOT}/<version>/bin/initdb)",
            "servelab setup --with postgres (Debian's postgresql package)",
        )
    return max(found, key=lambda b: int(b.parent.name))


def _owner() -> tuple[int, int, list[str]]:
    """(uid, gid, argv prefix) the server runs with: ourselves, or postgres when root."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid(), []
    try:
        entry = pwd.getpwnam(RUN_AS)
    except KeyError:
        raise MissingToolError(
            f"PostgreSQL refuses to run as root and there is no {RUN_AS!r} user to run it as",
            "install Debian's postgresql package (it creates the user), or run as another user",
        ) from None
    prefix = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]
    return entry.pw_uid, entry.pw_gid, prefix


@contextmanager
def run_postgres(
    *,
    startup_timeout_s: float = 30.0,
    namespace: NetNamespace | None = None,
    listen_host: str = "127.0.0.1",
    cpus: str | None = None,
) -> Iterator[PostgresServer]:
    """A fresh PostgreSQL for the ``with`` block; stopped and its directory removed after.

    With ``namespace`` the server runs inside it, listening on 127.0.0.1 there
    and on ``listen_host`` (the namespace's address).

    Raises MissingToolError when PostgreSQL is not installed, StackStartError
    (with the server's log) when initdb or the server fails.
    """
    bindir = find_bindir()
    uid, gid, prefix = _owner()
    workdir = Path(tempfile.mkdtemp(prefix="servelab-pg-"))
    JANITOR.watch("path", workdir)
    process: ManagedProcess | None = None
    try:
        os.chmod(workdir, 0o700)
        os.chown(workdir, uid, gid)
        env = {
            OWNER_ENV: str(os.getpid()),  # tells whose server this is (see servelab.host.procs)
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C.UTF-8",
            "HOME": str(workdir),
        }
        _initdb(bindir, prefix, workdir, env)
        port = free_port()
        log = workdir / LOG_NAME
        log.touch()
        os.chown(log, uid, gid)
        listen = ",".join(dict.fromkeys(["127.0.0.1", listen_host]))
        inside = namespace.prefix() if namespace is not None else []
        server_argv = [
            str(bindir / "postgres"), "-D", str(workdir / "data"), "-p", str(port),
            "-k", str(workdir), "-c", f"listen_addresses={listen}", "-c", "fsync=off",
            "-c", "max_connections=200",
        ]
        process = ManagedProcess(
            "postgres",
            [*inside, *prefix, *server_argv],
            log_path=log,
            cwd=workdir,
            env=env,
            cpus=cpus,  # where the stack is not (the seed's database was elsewhere)
        ).start()
        _wait_ready(bindir, inside, port, process, startup_timeout_s)
        _createdb(bindir, prefix, workdir, port, env, process)
        yield PostgresServer(
            listen_host, port, workdir, DB_NAME, DB_USER, workdir, bindir.parent.name, process
        )
    finally:
        if process is not None:
            _stop(process)
        shutil.rmtree(workdir, ignore_errors=True)
        JANITOR.forget("path", workdir)


def _initdb(bindir: Path, prefix: list[str], workdir: Path, env: dict[str, str]) -> None:
    """A new cluster in ``workdir/data``, trusting local connections (loopback only)."""
    argv = [
        *prefix, str(bindir / "initdb"), "-D", str(workdir / "data"), "-U", DB_USER,
        "--auth=trust", "-E", "UTF8", "--no-sync",
    ]
    init = subprocess.run(
        argv, capture_output=True, text=True, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
        check=False, timeout=120,
    )
    if init.returncode != 0:
        raise StackStartError(
            f"PostgreSQL's initdb failed (exit code {init.returncode})",
            "see its output below",
            detail="\n".join((init.stdout + init.stderr).strip().splitlines()[-15:]),
        )


def _createdb(
    bindir: Path, prefix: list[str], workdir: Path, port: int, env: dict[str, str],
    process: ManagedProcess,
) -> None:
    argv = [
        *prefix, str(bindir / "createdb"), "-h", str(workdir), "-p", str(port), "-U", DB_USER,
        DB_NAME,
    ]
    created = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=workdir, check=False, timeout=60
    )
    if created.returncode != 0:
        raise StackStartError(
            f"creating database {DB_NAME!r} failed: {created.stderr.strip()}",
            "see PostgreSQL's log",
            detail=process.log_tail(),
        )


def _wait_ready(
    bindir: Path, inside: list[str], port: int, process: ManagedProcess, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.exit_code() is not None:
            raise StackStartError(
                f"PostgreSQL exited during start-up (exit code {process.exit_code()})",
                "see its log below",
                detail=process.log_tail(),
            )
        isready = [str(bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]
        ready = subprocess.run(
            [*inside, *isready, "-t", "1"],
            capture_output=True,
            check=False,
        )
        if ready.returncode == 0:
            return
        time.sleep(0.1)
    raise StackStartError(
        f"PostgreSQL did not accept connections within {timeout_s:g} s",
        "see its log below",
        detail=process.log_tail(),
    )


def _stop(process: ManagedProcess, grace_s: float = 10.0) -> None:
    """Fast shutdown (SIGINT: clients cut, no waiting for them), then the group goes."""
    if process.exit_code() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGINT)
        deadline = time.monotonic() + grace_s
        while process.exit_code() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    process.stop()
