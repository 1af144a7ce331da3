"""Bad input to the failure-mode commands: one line with the fix, exit code 2, no traceback.

None of these starts a server: the input is refused before anything runs.
"""

from __future__ import annotations

import pytest
from support import run_cli


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["study", "backlog", "--rate", "0"], "--rate must be positive"),
        (["study", "backlog", "--rate", "-5"], "--rate must be positive"),
        (["study", "backlog", "--sleep", "-1"], "--sleep must be positive"),
        (["study", "backlog", "--timeout", "0"], "--timeout must be positive"),
        (["study", "backlog", "--somaxconn", "128,70000"], "somaxconn 70000 is out of range"),
        (["study", "backlog", "--somaxconn", "0"], "somaxconn 0 is out of range"),
        (["study", "backlog", "--somaxconn", "lots"], "invalid --somaxconn list"),
        (["study", "backlog", "--rate", "1", "--requests", "100000"], "more than 1,800"),
        (["study", "backlog", "--sleep", "100"], "more than 1,800"),
        (["study", "worker-recycling", "--rate", "-1"], "--rate must be positive"),
        (["ramp", "--start", "0"], "start rate must be positive"),
        (["ramp", "--start", "-10"], "start rate must be positive"),
        (["ramp", "--step-seconds", "-1"], "step duration must be in"),
        (["ramp", "--start", "1e8", "--max-rate", "1e9", "--factor", "2"], "more than 10,000,000"),
        (["ramp", "--start", "1", "--max-rate", "1e6", "--step", "1"], "more than 40"),
        (["ramp", "--somaxconn", "99999"], "somaxconn 99999 is out of range"),
        (["ramp", "--max-error-ratio", "2"], "ramp SLO: max_error_ratio"),
        (["ramp", "--timeout", "-1"], "request timeout must be positive"),
    ],
)
def test_bad_failure_study_input(args: list[str], message: str) -> None:
    done = run_cli(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert "(fix: " in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
