"""A blocking WSGI app: sleep, then answer ``ok`` (seed nginx_gunicorn_somaxconn).

Every request, whatever its method and path, holds its worker for
``SERVELAB_SLEEP_S`` seconds (default 2.0) with ``time.sleep``, like a slow
database call would. With one sync worker that makes the listen backlog the
only place where waiting requests can queue, which is what the seed studies.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

SLEEP_S = float(os.environ.get("SERVELAB_SLEEP_S", "2.0"))
_BODY = b"ok\n"


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    # Drain a request body so keepalive connections stay in sync.
    stream = environ.get("wsgi.input")
    length = environ.get("CONTENT_LENGTH") or "0"
    if stream is not None and length.isdigit() and int(length) > 0:
        stream.read(int(length))
    time.sleep(SLEEP_S)
    start_response(
        "200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(_BODY)))]
    )
    return [_BODY]
