"""hypercorn's command lines."""

from __future__ import annotations

from pathlib import Path

from servelab.apps import ResolvedApp
from servelab.config.stack import ServerSpec
from servelab.servers import hypercorn

ASGI = ResolvedApp("servelab.apps.seed_fastapi:app", "asgi", None, is_factory=False)

FACTORY = ResolvedApp("mypkg.app:create", "asgi", Path("/srv/app"), is_factory=True)


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_hypercorn_command() -> None:
    server = ServerSpec(kind="hypercorn", workers=2, max_requests=100, max_requests_jitter=10)
    argv = hypercorn.hypercorn_command(server, ASGI, socket=Path("/tmp/x/app.sock"))
    assert _after(argv, "--bind") == "unix:/tmp/x/app.sock"
    assert _after(argv, "--workers") == "2"
    assert _after(argv, "--max-requests") == "100"
    assert _after(argv, "--max-requests-jitter") == "10"
    assert _after(argv, "--error-logfile") == "-"  # into the stack's log file
    assert argv[-1] == ASGI.import_path
    tcp = hypercorn.hypercorn_command(ServerSpec(kind="hypercorn"), FACTORY, port=9000)
    assert _after(tcp, "--bind") == "127.0.0.1:9000" and tcp[-1] == "mypkg.app:create()"
