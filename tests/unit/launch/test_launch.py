"""The launcher's temp dir and the start-up log excerpt."""

from __future__ import annotations

from pathlib import Path

import pytest

import servelab.launch as launch_module
from servelab.launch.readiness import log_excerpt


def test_workdir_falls_back_to_tmp_when_socket_path_too_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(deep))
    workdir = launch_module._make_workdir()
    try:
        assert workdir.parent == Path("/tmp") and workdir.name.startswith("servelab-")
        assert len(str(workdir / launch_module.SOCKET_NAME)) < 108
        assert list(deep.iterdir()) == []
    finally:
        workdir.rmdir()


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
