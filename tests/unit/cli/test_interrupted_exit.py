"""The exit code after Ctrl-C is 130 even when the interrupt passed through ``exec``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from support import with_default_sigint

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


def _run_as_module(source: str, tmp_path) -> subprocess.CompletedProcess[str]:
    """``source`` run as ``python -m servelab_interrupt_probe interrupt-me``."""
    (tmp_path / "servelab_interrupt_probe.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    # SIGINT at its default in the probe: a test run started in the background (nohup
    # ... &) ignores it, and the probe would inherit that and never see its own Ctrl-C.
    return subprocess.run(
        [sys.executable, "-m", "servelab_interrupt_probe", "interrupt-me"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
        preexec_fn=with_default_sigint,
    )


def test_an_interrupt_that_went_through_exec_still_exits_130(tmp_path):
    done = _run_as_module(PROBE, tmp_path)
    assert done.returncode == 130, done.stderr
    assert "interrupted (SIGINT)" in done.stderr


# Ctrl-C arriving while a weakref callback runs: Python ignores (and prints) exceptions
# raised there, so without servelab's hook the command would go on and exit 0.
SWALLOWED = textwrap.dedent(
    """
    import os, signal, time, weakref

    import click

    from servelab import cli

    class Thing:
        pass

    def in_a_callback(ref):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the interrupt is raised here, where Python ignores it

    def interrupt_me():
        thing = Thing()
        kept = weakref.ref(thing, in_a_callback)
        del thing
        for _ in range(100):
            time.sleep(0.01)
        print("went on after Ctrl-C", flush=True)

    cli.cli.add_command(click.Command("interrupt-me", callback=interrupt_me))
    cli.main()
    """
)


def test_an_interrupt_swallowed_by_a_weakref_callback_is_raised_again(tmp_path):
    done = _run_as_module(SWALLOWED, tmp_path)
    assert done.returncode == 130, done.stderr
    assert "went on" not in done.stdout
    assert "interrupted (SIGINT)" in done.stderr and "Traceback" not in done.stderr
