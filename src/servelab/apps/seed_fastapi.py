"""The seeds' FastAPI app: echo an Item, or answer with a ~1 MB JSON document.

Endpoints (as in the seed articles' harness):

- ``POST /sync/items/`` and ``POST /async/items/``: return the posted Item;
- ``POST /sync/big_json_response/`` and ``POST /async/big_json_response/``:
  take an Item and return the same ~1 MB document;
- ``GET /health``: ``{"status": "ok"}``.

``SERVELAB_EXTRA_WORK_US`` (default 0) makes every endpoint spin the CPU for
that many microseconds of the thread's own CPU time per request: a planted,
known slowdown that lets a benchmark check that servelab notices a change of a
given size. (By CPU time, not the wall clock: a worker that shares its CPU with
other stacks would otherwise spin less CPU the more it waits for it.)
``SERVELAB_EXTRA_SYSCALLS_US`` (default 0) plants as much in ``extra_syscalls()``,
which spends about half of it in system calls (``--profile`` must charge the
kernel's time to it).

The big document is generated once at import from a fixed seed, so every
worker of every run serves the same bytes, and the response is serialised by
the framework on every request, as in the seed (where that cost is part of
what was measured). The return annotations matter: with them FastAPI
serialises through pydantic (~2.5 ms for the big document) rather than
``jsonable_encoder`` (~50 ms), so the app does not hide the stack's costs.
"""

from __future__ import annotations

import json
import os
import random
import string
import time
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

BIG_DOCUMENT_BYTES = 1024 * 1024  # size target, as json.dumps writes it (served compact: ~1.01 MB)
_SEED = 20240611
_ALPHABET = string.ascii_letters + string.digits + "-_.,;:!?()[]{}@#$%^&*+=/|~ "


class Item(BaseModel):
    name: str
    description: str | None = None
    price: float
    tax: float | None = None


def make_big_document(min_bytes: int = BIG_DOCUMENT_BYTES, seed: int = _SEED) -> dict[str, Any]:
    """A deterministic JSON-able dict of ``min_bytes`` or a little more.

    Shaped like the seed's test file: numbered records of 10 values each, all of
    one kind per record (a long string, a list of short strings, a digit string,
    a boolean). Sizes are tracked while building, so this is linear and fast.
    """
    rng = random.Random(seed)
    kinds = ("text", "array", "digits", "flag")
    document: dict[str, Any] = {}
    size = 2  # "{}"
    index = 0
    while size < min_bytes:
        kind = rng.choice(kinds)
        record: dict[str, Any] = {}
        for field in range(10):
            if kind == "text":
                record[str(field)] = "".join(rng.choices(_ALPHABET, k=1000))
            elif kind == "array":
                record[str(field)] = rng.choices(string.ascii_letters, k=100)
            elif kind == "digits":
                record[str(field)] = "".join(rng.choices(string.digits, k=1000))
            else:
                record[str(field)] = rng.random() < 0.5
        document[str(index)] = record
        size += _json_size(str(index), record)
        index += 1
    return document


def _json_size(key: str, record: dict[str, Any]) -> int:
    """Bytes that ``"key": record, `` adds to ``json.dumps`` output (an upper bound)."""
    return len(json.dumps(key)) + 2 + len(json.dumps(record)) + 2


BIG_DOCUMENT = make_big_document()
EXTRA_WORK_S = float(os.environ.get("SERVELAB_EXTRA_WORK_US", "0")) / 1e6
EXTRA_SYSCALLS_S = float(os.environ.get("SERVELAB_EXTRA_SYSCALLS_US", "0")) / 1e6


def extra_work() -> None:
    """Spin (not sleep) for EXTRA_WORK_S of this thread's CPU time: CPU work, as a
    slower app would do, the same amount however busy the CPU is. Reading a thread's CPU
    time is a system call: read at every turn of the loop it made 78 % of the spin kernel
    time (1 s: 0.21 s user, 0.78 s system), which ``--profile`` shows as the kernel's,
    not as this function's. So the loop turns up to 1,000 times between readings, fewer
    as the end nears (about 20 ns a turn), so as not to overshoot short spins."""
    if EXTRA_WORK_S > 0:
        end = time.thread_time() + EXTRA_WORK_S
        while (left := end - time.thread_time()) > 0:
            for _ in range(min(1000, 1 + int(left * 5e7))):
                pass


def extra_syscalls() -> None:
    """Spin for EXTRA_SYSCALLS_S of this thread's CPU time, reading it (a system call:
    the vDSO cannot read a thread's CPU clock) every 15 turns of the loop: about half of
    it is kernel time (2 s on this project's VM: 1.06 s user, 0.93 s system), as in code
    that logs, writes files or talks to sockets."""
    if EXTRA_SYSCALLS_S > 0:
        end = time.thread_time() + EXTRA_SYSCALLS_S
        while time.thread_time() < end:
            for _ in range(15):
                pass


app = FastAPI(title="servelab seed app", docs_url=None, redoc_url=None, openapi_url=None)


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/sync/items/")
def sync_item(item: Item) -> Item:
    extra_work()
    extra_syscalls()
    return item


@app.post("/async/items/")
async def async_item(item: Item) -> Item:
    extra_work()
    extra_syscalls()
    return item


@app.post("/sync/big_json_response/")
def sync_big_json_response(item: Item) -> dict[str, Any]:
    del item  # validated, then ignored, as in the seed
    extra_work()
    extra_syscalls()
    return BIG_DOCUMENT


@app.post("/async/big_json_response/")
async def async_big_json_response(item: Item) -> dict[str, Any]:
    del item
    extra_work()
    extra_syscalls()
    return BIG_DOCUMENT
