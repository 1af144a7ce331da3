"""The start-up log excerpt a failed start shows."""

from __future__ import annotations

from servelab.host.readiness import log_excerpt

GUNICORN_BOOT_FAILURE = """\
[INFO] Starting gunicorn
[INFO] Booting worker with pid: 11
[ERROR] Exception in worker process
Traceback (most recent call last):
  File "gunicorn/arbiter.py", line 1, in spawn_worker
    worker.init_process()
  File "app.py", line 3, in <module>
    raise RuntimeError("no DATABASE_URL")
RuntimeError: no DATABASE_URL
""" + "\n".join(f"[INFO] filler line {i}" for i in range(30)) + """
[ERROR] Reason: Worker failed to boot.
"""


def test_log_excerpt_keeps_the_first_error_and_the_tail() -> None:
    excerpt = log_excerpt(GUNICORN_BOOT_FAILURE, lines=5).splitlines()
    assert excerpt[0] == "[ERROR] Exception in worker process"
    assert "RuntimeError: no DATABASE_URL" in excerpt
    assert "[INFO] filler line 0" not in excerpt
    assert excerpt[-1] == "[ERROR] Reason: Worker failed to boot."
    assert len(excerpt) == 7 + 1 + 5  # the error block, "[...]", the tail


def test_log_excerpt_is_a_plain_tail_when_the_error_is_in_it() -> None:
    text = "\n".join(["a", "b", "[ERROR] late", "c"])
    assert log_excerpt(text, lines=3) == "b\n[ERROR] late\nc"
    assert log_excerpt("", lines=3) == ""
