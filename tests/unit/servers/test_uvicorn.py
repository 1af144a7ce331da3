"""uvicorn's command lines."""

from __future__ import annotations

import sys
from pathlib import Path

from servelab.apps import ResolvedApp
from servelab.config.stack import ServerSpec
from servelab.servers import uvicorn

ASGI = ResolvedApp("servelab.apps.seed_fastapi:app", "asgi", None, is_factory=False)


def test_uvicorn_command_tcp() -> None:
    server = ServerSpec(kind="uvicorn", workers=3, backlog=77, keepalive_s=9)
    argv = uvicorn.uvicorn_command(server, ASGI, port=18002)
    assert argv[:4] == [sys.executable, "-m", "uvicorn", ASGI.import_path]
    joined = " ".join(argv)
    for part in ("--host 127.0.0.1", "--port 18002", "--workers 3", "--backlog 77",
                 "--timeout-keep-alive 9", "--no-access-log", "--log-level warning",
                 "--interface asgi3"):
        assert part in joined, part
    assert "--factory" not in argv and "--uds" not in argv


def test_uvicorn_command_unix_wsgi_factory(tmp_path: Path) -> None:
    app = ResolvedApp("pkg.mod:make", "wsgi", tmp_path, is_factory=True)
    argv = uvicorn.uvicorn_command(ServerSpec(kind="uvicorn"), app, socket=tmp_path / "a.sock")
    joined = " ".join(argv)
    assert f"--uds {tmp_path}/a.sock" in joined and "--host" not in argv
    assert "--interface wsgi" in joined
    assert "--factory" in argv
    assert f"--app-dir {tmp_path}" in joined
