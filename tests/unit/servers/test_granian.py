"""granian's command lines."""

from __future__ import annotations

from pathlib import Path

from servelab.apps import ResolvedApp
from servelab.config.stack import ServerSpec
from servelab.servers import granian

ASGI = ResolvedApp("servelab.apps.seed_fastapi:app", "asgi", None, is_factory=False)

WSGI = ResolvedApp("servelab.apps.sleepy_wsgi:app", "wsgi", None, is_factory=False)

FACTORY = ResolvedApp("mypkg.app:create", "asgi", Path("/srv/app"), is_factory=True)


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_granian_command_tcp_asgi() -> None:
    server = ServerSpec(kind="granian", workers=3, threads=2, blocking_threads=4, backlog=256)
    argv = granian.granian_command(server, ASGI, port=8123)
    assert argv[1:3] == ["-m", "granian"] and argv[-1] == ASGI.import_path
    assert (_after(argv, "--host"), _after(argv, "--port")) == ("127.0.0.1", "8123")
    assert _after(argv, "--interface") == "asgi"
    assert _after(argv, "--workers") == "3"
    assert _after(argv, "--runtime-threads") == "2"
    assert _after(argv, "--blocking-threads") == "4"
    assert _after(argv, "--backlog") == "256"
    assert "--uds" not in argv


def test_granian_command_unix_wsgi_and_factory(tmp_path: Path) -> None:
    sock = tmp_path / "app.sock"
    argv = granian.granian_command(ServerSpec(kind="granian"), WSGI, socket=sock)
    assert _after(argv, "--uds") == str(sock) and _after(argv, "--interface") == "wsgi"
    assert "--blocking-threads" not in argv  # granian's own default
    argv = granian.granian_command(ServerSpec(kind="granian"), FACTORY, port=1)
    assert "--factory" in argv and _after(argv, "--working-dir") == "/srv/app"
