"""Every path a command writes is checked before anything starts: an unwritable one is
one line and exit 2, never a traceback after the measuring (issue 26: `check --junit
/proc/nope.xml` measured the whole check first). The CLI runs in-process; any process
started (subprocess.Popen) fails the test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import click
import pytest
from support import run_cli

from servelab.cli import cli

APP = "servelab.apps.sleepy_wsgi:app"
SLEEPY = Path(__file__).resolve().parents[2] / "fixtures" / "results" / "sleepy-workers"
EXPERIMENT = '[baseline]\n[[workloads]]\nname = "w"\nload = { duration_s = 2 }\n'

# Each command as the tests call it (FILE: an experiment file; BASE: a baseline app dir).
COMMANDS = {
    "study": ["study", "quick"],
    "run": ["run", "FILE"],
    "ramp": ["ramp"],
    "check": ["check", "--app", APP, "--baseline-dir", "BASE"],
    "tune": ["tune"],
    "capacity": ["capacity"],
    "bisect": ["bisect", "--good", "HEAD~1", "--app", APP],
    "history": ["history", "--results", str(SLEEPY.parent)],
    "report": ["report", str(SLEEPY)],
    "export": ["export", str(SLEEPY), "--no-check"],
    "traffic": ["traffic"],
}
# The commands that keep no results store (no --results to write).
STORELESS = ("report", "export", "history", "traffic")
# The path options that servelab only reads (report's and export's --results: where RESULT
# is looked up; what they write goes to --out, checked when it is written, before a boot).
READ_ONLY = {"--app-dir", "--python", "--body-file", "--baseline-dir", "--space", "--replay"}
READ_BY = {"report": {"--results"}, "export": {"--results"}, "history": {"--results"},
           "bisect": {"--lock-good", "--lock-bad", "--wheelhouse"}}
# The options every measuring command has, and what each writes.
MEASURING = {"--results": "dir", "--out": "dir", "--export-json": "file",
             "--export-markdown": "file", "--export-csv": "file"}
WRITES = {
    **{name: MEASURING for name in ("study", "run", "ramp", "tune", "capacity")},
    "check": {**MEASURING, "--summary-md": "file", "--junit": "file"},
    "bisect": {**MEASURING, "--summary-md": "file", "--json": "file", "--junit": "file"},
    "history": {"--out": "dir"},
    "report": {"--out": "dir"},
    "export": {"--out": "dir"},
    "traffic": {"--out": "dir", "--make-log": "file"},
}
CASES = [(command, option) for command, options in WRITES.items() for option in options]
# Places no one can write, root included: a virtual file system, below a plain file.
PLACES = {"proc": lambda tmp: Path("/proc/servelab-nope"),
          "below-a-file": lambda tmp: tmp / "a-file" / "nope"}


def _path_options(command: click.Command) -> set[str]:
    return {
        name
        for param in command.params
        if isinstance(param, click.Option) and isinstance(param.type, click.Path)
        for name in param.opts if name.startswith("--")
    }


def test_every_path_option_of_every_command_is_read_only_or_tested() -> None:
    """A new option that writes a file joins WRITES (and so the test below)."""
    for name, command in cli.commands.items():
        written = _path_options(command) - READ_ONLY - READ_BY.get(name, set())
        assert written == set(WRITES.get(name, {})), name


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize(("command", "option"), CASES)
def test_an_unwritable_output_is_one_line_before_anything_starts(
    command: str, option: str, place: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_process(*args, **kwargs):
        raise AssertionError(f"a process started before {option} was checked: {args[0]}")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    (tmp_path / "a-file").write_text("not a directory")
    (tmp_path / "base").mkdir()
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    args = [{"FILE": str(tmp_path / "exp.toml"), "BASE": str(tmp_path / "base")}.get(a, a)
            for a in COMMANDS[command]]
    target = PLACES[place](tmp_path)
    if WRITES[command][option] == "file":
        target = target.with_suffix(".out")
    results = [] if option in ("--results", "--out") or command in STORELESS else [
        "--results", str(tmp_path / "results")]
    done = run_cli(*args, option, str(target), *results, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    shown = "--results" if option == "--out" and command not in STORELESS else option
    assert line.startswith(f"servelab: error: {shown} {target}: cannot write there"), line
    assert "(fix: " in line
    assert not (tmp_path / "results").exists() and not list(tmp_path.glob("servelab-results"))


def test_a_directory_given_for_a_file_and_github_summary_are_refused(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    check = ["check", "--app", APP, "--baseline-dir", str(tmp_path / "base"),
             "--results", str(tmp_path / "results")]
    done = run_cli(*check, "--junit", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "(it is a directory)" in done.stderr
    done = run_cli(*check, env={"GITHUB_STEP_SUMMARY": "/proc/servelab-nope.md"}, cwd=tmp_path)
    assert done.returncode == 2
    assert "$GITHUB_STEP_SUMMARY /proc/servelab-nope.md: cannot write there" in done.stderr
    done = run_cli("study", "quick", "--export-json", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "--export-json" in done.stderr


def test_the_probe_leaves_nothing_behind(tmp_path: Path) -> None:
    from servelab.results.outdir import unwritable

    assert unwritable(tmp_path / "new" / "dir", directory=True) is None
    assert unwritable(tmp_path / "file.json") is None
    assert list(tmp_path.iterdir()) == []
