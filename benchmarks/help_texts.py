"""Every command's and subcommand's ``--help`` text, to prove a CLI refactoring left them
byte-identical: ``record FILE`` writes them (JSON, command path -> text), ``compare FILE``
exits 1 naming each command whose text changed.

    PYTHONPATH=src python benchmarks/help_texts.py record /tmp/help-before.json
    ... refactor ...
    PYTHONPATH=src python benchmarks/help_texts.py compare /tmp/help-before.json
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import click
from click.testing import CliRunner

from servelab.cli import cli


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path under ``group``, the group itself first."""
    yield path
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        elif command is not None:
            yield (*path, name)


def help_texts() -> dict[str, str]:
    runner = CliRunner()
    texts = {}
    for path in commands(cli):
        result = runner.invoke(cli, [*path, "--help"], prog_name="servelab", env={"COLUMNS": "100"})
        if result.exit_code != 0:
            raise SystemExit(f"servelab {' '.join(path)} --help exited {result.exit_code}")
        texts[" ".join(("servelab", *path))] = result.output
    return texts


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("record", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    action, file = argv[0], Path(argv[1])
    now = help_texts()
    if action == "record":
        file.write_text(json.dumps(now, indent=1))
        print(f"recorded {len(now)} help texts in {file}")
        return 0
    before = json.loads(file.read_text())
    changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for name in changed:
        print(f"{name}: changed")
        sys.stdout.writelines(difflib.unified_diff(
            (before.get(name) or "").splitlines(True), (now.get(name) or "").splitlines(True)
        ))
    print(f"{len(now)} help texts, {len(changed)} changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
