"""The Python API and the CLI's -q/-v, for real (a small experiment on the sleepy app)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import servelab

pytestmark = pytest.mark.integration

EXPERIMENT = """
name = "api"
repetitions = 2
slices = 1
[warmup]
requests = 10
max_rounds = 1
[baseline]
name = "tcp"
app = { ref = "sleepy", env = { SERVELAB_SLEEP_S = "0.001" } }
server = { kind = "gunicorn", worker_class = "sync", workers = 1 }
[[variants]]
name = "unix"
proxy = { transport = "unix" }
[[workloads]]
name = "w"
load = { concurrency = 2, requests = 50 }
"""


def test_measure_returns_the_analysed_result(tmp_path: Path, no_leftover_processes) -> None:
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT)
    experiment = servelab.Experiment.from_toml(path)
    result = servelab.measure(experiment, servelab.RunOptions(results_dir=tmp_path / "r"))
    assert result.experiment.name == "api"
    assert len(result.runs) == 4 and all(r.load.requests_total == 50 for r in result.runs)
    [unix] = [v for v in result.analysis.variants if v.variant == "unix"]
    assert unix.comparisons["rps"].verdict in (
        "better", "worse", "no significant difference", "inconclusive"
    )
    with pytest.raises(Exception, match="frozen"):
        result.runs[0].variant = "changed"  # frozen records


def test_quiet_and_verbose(tmp_path: Path) -> None:
    path = tmp_path / "exp.toml"
    # One start of each variant: what -q and -v print does not depend on how many.
    path.write_text(EXPERIMENT.replace("repetitions = 2", "repetitions = 1"))
    script = str(Path(sys.executable).with_name("servelab"))

    def run(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script, *flags, "run", str(path), "--results", str(tmp_path / "r")],
            capture_output=True, text=True, timeout=300, check=False,
        )

    verbose = run("-v")
    assert verbose.returncode == 0, verbose.stderr
    started = [line for line in verbose.stderr.splitlines() if "servelab: starting" in line]
    assert any(line.startswith("servelab: starting nginx: ") and "/nginx -p " in line
               for line in started), started  # every command line it starts
    assert any("-m gunicorn -c " in line for line in started), started
    quiet = run("-q")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""  # no progress, no notes
    assert "result #2" in quiet.stdout  # the results still
    bad = subprocess.run([script, "-q", "study", "nope"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert bad.returncode == 2 and "unknown study 'nope'" in bad.stderr  # errors still
