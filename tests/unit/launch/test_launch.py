"""The launcher's temp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

import servelab.launch as launch_module


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
