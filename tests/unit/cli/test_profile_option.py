"""--profile on the measuring commands reaches the library as RunOptions.profile."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from servelab.cli import cli


@pytest.mark.parametrize("given", [(), ("--profile",)])
def test_run_hands_profile_to_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: tuple[str, ...]
) -> None:
    seen = []
    monkeypatch.setattr("servelab.api.run", lambda e, options, *a, **k: seen.append(options))
    spec = Path(__file__).resolve().parents[3] / "src/servelab/examples/port-vs-socket.toml"
    done = CliRunner().invoke(cli, ["run", str(spec), "--results", str(tmp_path), *given])
    assert done.exit_code == 0, done.output
    assert [options.profile for options in seen] == [bool(given)]
