"""Serve one request to an app in this process, with no server, a given number of
times: what ``servelab.measuring.instructions`` runs under valgrind's cachegrind to count
the app's instructions per request. Standard library only, since it runs in the app's own
Python (its virtualenv need not hold servelab).

Usage: ``python instruction_probe.py JSON`` with JSON ``{"app": "pkg.mod:attr",
"interface": "wsgi"|"asgi", "factory": bool, "method", "path", "headers": [[name, value]],
"body": str, "requests": int}``; prints ``{"statuses": [...]}`` (each distinct status).
"""

from __future__ import annotations

import importlib
import io
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio


def load(import_path: str, factory: bool) -> Any:
    module, _, attr = import_path.partition(":")
    found: Any = importlib.import_module(module)
    for part in attr.split("."):
        found = getattr(found, part)
    return found() if factory else found


def wsgi_request(app: Any, ask: dict[str, Any]) -> int:
    path, _, query = ask["path"].partition("?")
    body = ask["body"].encode()
    environ = {
        "REQUEST_METHOD": ask["method"], "SCRIPT_NAME": "", "PATH_INFO": path,
        "QUERY_STRING": query, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_LENGTH": str(len(body)), "wsgi.version": (1, 0), "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr, "wsgi.multithread": False,
        "wsgi.multiprocess": False, "wsgi.run_once": False,
    }
    for name, value in ask["headers"]:
        key = name.upper().replace("-", "_")
        environ[key if key == "CONTENT_TYPE" else f"HTTP_{key}"] = value
    statuses: list[str] = []

    def start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
        statuses.append(status)
        return lambda data: None

    result = app(environ, start_response)
    try:
        for _ in result:
            pass
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return int(statuses[-1].split()[0])


async def asgi_request(app: Any, ask: dict[str, Any]) -> int:
    import asyncio  # here, not above: importing it is 3x a small WSGI probe's whole count

    path, _, query = ask["path"].partition("?")
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
        "method": ask["method"], "scheme": "http", "path": path, "raw_path": path.encode(),
        "query_string": query.encode(), "root_path": "",
        "headers": [(n.lower().encode(), v.encode()) for n, v in ask["headers"]],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
    }
    body: dict[str, Any] | None = {
        "type": "http.request", "body": ask["body"].encode(), "more_body": False,
    }
    done = asyncio.Event()
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal body
        if body is not None:
            message, body = body, None
            return message
        await done.wait()  # as a server does: the client leaves once answered
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    await app(scope, receive, send)
    return statuses[-1]


async def asgi_requests(app: Any, ask: dict[str, Any], count: int) -> set[int]:
    """``count`` requests between the app's lifespan start-up and shut-down (when it has
    them: an app that does not speak lifespan is served without)."""
    import asyncio
    import contextlib

    events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message["type"].startswith("lifespan.startup"):
            started.set()

    await events.put({"type": "lifespan.startup"})
    lifespan = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}},
                                         events.get, send))
    waiting = asyncio.ensure_future(started.wait())
    await asyncio.wait([lifespan, waiting], return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    statuses = {await asgi_request(app, ask) for _ in range(count)}
    if not lifespan.done():
        await events.put({"type": "lifespan.shutdown"})
        with contextlib.suppress(Exception):  # shut-down is the app's; the counts are taken
            await asyncio.wait_for(lifespan, 5)
    return statuses


def main() -> None:
    ask = json.loads(sys.argv[1])
    app = load(ask["app"], ask["factory"])
    if ask["interface"] == "asgi":
        import asyncio

        statuses = asyncio.run(asgi_requests(app, ask, ask["requests"]))
    else:
        statuses = {wsgi_request(app, ask) for _ in range(ask["requests"])}
    print(json.dumps({"statuses": sorted(statuses)}))


if __name__ == "__main__":
    main()
