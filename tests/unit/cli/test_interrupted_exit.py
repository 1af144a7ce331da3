"""The exit code after Ctrl-C is 130 even when the interrupt passed through ``exec``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

# A KeyboardInterrupt raised inside exec() of a string, the way a dataclass being created
# by a lazy import meets a Ctrl-C. Run as `python -m`, as the tests and many users run it.
PROBE = textwrap.dedent(
    """
    import click

    from servelab import cli

    def interrupt_me():
        exec("raise KeyboardInterrupt")

    cli.cli.add_command(click.Command("interrupt-me", callback=interrupt_me))
    cli.main()
    """
)


def test_an_interrupt_that_went_through_exec_still_exits_130(tmp_path):
    (tmp_path / "servelab_interrupt_probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "servelab_interrupt_probe", "interrupt-me"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )
    assert done.returncode == 130, done.stderr
    assert "interrupted (SIGINT)" in done.stderr
