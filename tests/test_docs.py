"""The documentation builds, strictly, and documents every command and option.

``mkdocs build --strict`` fails on a broken link or anchor between pages, a page
missing from the nav or a nav entry without its page, and a snippet whose file is
gone (mkdocs.yml's ``validation`` and ``check_paths``). The command line reference
is generated from the click commands (mkdocs-click); the tests below fail when a
command of the ``servelab`` group (or of a group under it), or one of its options, is
not on that page. Every page is in the nav, every validation page names the
``benchmarks/`` script that reproduces it, and the reference pages that copy the code
(warning kinds, the database schema) say what the code says.
Needs the ``docs`` extra (``pip install -e '.[docs]'``; scripts/setup.sh installs it).
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from servelab.cli import cli

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# The how-to guides: one task each, the commands on the first screen, short.
GUIDE_LINES = 260


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    paths = [str(ROOT / "src"), os.environ.get("PYTHONPATH")]
    env = {
        **os.environ,
        # The checkout's commands, whatever is installed; no mkdocs 2 notice in the log.
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "NO_MKDOCS_2_WARNING": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if "No module named mkdocs" in done.stderr:
        pytest.fail("mkdocs is not installed: pip install -e '.[docs]' (scripts/setup.sh does)")
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


def command_paths(group: click.Group, prefix: str = "servelab") -> list[str]:
    """Every command under ``group``, as its anchor on the reference page
    ("servelab-study", "servelab-results-show")."""
    found = []
    for name, command in group.commands.items():
        if command.hidden:
            continue
        path = f"{prefix}-{name}"
        found.append(path)
        if isinstance(command, click.Group):
            found.extend(command_paths(command, path))
    return found


def test_every_command_is_in_the_cli_reference(site: Path):
    page = (site / "cli" / "index.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'<h[1-6][^>]* id="([^"]+)"', page))
    expected = command_paths(cli)
    assert {"servelab-study", "servelab-results-show"} <= set(expected)
    missing = [path for path in expected if path not in anchors]
    assert not missing, f"commands missing from docs/cli.md's reference: {missing}"
    # click >= 8.3's marker for "no default" must not show as a default (see docs/cli.md).
    assert "<code>Sentinel" not in page


def test_every_study_has_its_page(site: Path):
    from servelab.studies import all_studies

    pages = site / "studies"
    missing = [name for name in all_studies() if not (pages / name / "index.html").exists()]
    assert not missing, f"studies without a page in docs/studies/ (and mkdocs.yml's nav): {missing}"


def commands(group: click.Group, prefix: str = "servelab") -> list[tuple[str, click.Command]]:
    """``command_paths``'s anchors with their commands, the group itself first."""
    found: list[tuple[str, click.Command]] = [(prefix, group)]
    for name, command in group.commands.items():
        if command.hidden:
            continue
        path = f"{prefix}-{name}"
        if isinstance(command, click.Group):
            found.extend(commands(command, path))
        else:
            found.append((path, command))
    return found


def sections(page: str) -> dict[str, str]:
    """The reference page cut at its headings: each heading's id, and the text (tags
    stripped, entities decoded) from it to the next heading of any level."""
    marks = list(re.finditer(r'<h[1-6][^>]* id="([^"]+)"', page))
    return {
        mark.group(1): html.unescape(re.sub(r"<[^>]+>", "", page[mark.end():end]))
        for mark, end in zip(marks, [m.start() for m in marks[1:]] + [len(page)], strict=True)
    }


def test_every_option_is_in_the_cli_reference(site: Path):
    """Each command's section of the rendered reference names every one of its options,
    each of their spellings (``-r``, ``--repetitions``, ``--switch`` and ``--no-switch``):
    mkdocs-click renders the parser's own help, so a directive that stops covering a
    command, a depth that cuts a group short or a style that drops options fails here."""
    text = sections((site / "cli" / "index.html").read_text(encoding="utf-8"))
    missing = []
    for path, command in commands(cli):
        section = text.get(path, "")
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            for name in [*param.opts, *param.secondary_opts]:
                if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", section):
                    missing.append(f"{path} {name}")
    assert not missing, f"options missing from docs/cli.md's reference: {missing}"
    assert "--fail-if" in text["servelab-check"]  # the check itself can see an option


def nav_pages(entry: object) -> list[str]:
    """Every page file named in (a part of) mkdocs.yml's nav."""
    if isinstance(entry, str):
        return [entry] if entry.endswith(".md") else []
    if isinstance(entry, dict):
        return [page for value in entry.values() for page in nav_pages(value)]
    if isinstance(entry, list):
        return [page for item in entry for page in nav_pages(item)]
    return []


def test_every_page_is_in_the_nav():
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    listed = nav_pages(nav)
    assert len(listed) == len(set(listed)), "a page twice in mkdocs.yml's nav"
    # Files mkdocs.yml's exclude_docs names are included into pages, not pages themselves.
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    excluded = [line.strip().lstrip("/") for line in config.get("exclude_docs", "").splitlines()
                if line.strip()]
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")
             if not any(path.relative_to(DOCS).match(pattern) for pattern in excluded)}
    assert pages - set(listed) == set(), "pages missing from mkdocs.yml's nav"
    assert set(listed) - pages == set(), "nav entries without their page in docs/"
    kinds = [next(iter(item)) for item in nav]
    order = ["Home", "Install", "Tutorial", "How-to guides", "Reference", "Explanation",
             "Validation"]
    assert [kind for kind in kinds if kind in order] == order


def test_every_validation_page_names_its_reproduce_command():
    """A validation page says how its figures were made: at least one line
    ``Reproduce: `...benchmarks/X.py ...` `` whose every script exists."""
    pages = sorted((DOCS / "validation").glob("*.md"))
    assert len(pages) > 5
    problems = []
    for page in pages:
        if page.name == "index.md":
            continue
        lines = [line for line in page.read_text().splitlines() if line.startswith("Reproduce:")]
        if not lines:
            problems.append(f"{page.name}: no 'Reproduce:' line")
        for line in lines:
            scripts = re.findall(r"benchmarks/[\w./-]+?\.(?:py|sh)\b", line)
            if not scripts:
                problems.append(f"{page.name}: no benchmarks/ script in {line!r}")
            problems += [f"{page.name}: {script} does not exist" for script in scripts
                         if not (ROOT / script).is_file()]
    assert not problems, problems


def test_guides_are_short_and_name_no_working_history():
    """A how-to guide fits a reader's attention; no page dates a figure by the project's
    own working history ("session 10") rather than by a date and a machine."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    guides = nav_pages(next(item["How-to guides"] for item in nav if "How-to guides" in item))
    assert "ci.md" in guides
    long = {g: n for g in guides if (n := len((DOCS / g).read_text().splitlines())) > GUIDE_LINES}
    assert not long, f"how-to guides over {GUIDE_LINES} lines: {long}"
    history = re.compile(r"(?<![\w-])(?:sessions? \d+|this session|session of this project)\b",
                         re.I)
    found = [f"{path.relative_to(DOCS)}: {m.group(0)}" for path in DOCS.rglob("*.md")
             for m in history.finditer(path.read_text())]
    assert not found, found


def test_every_warning_kind_is_in_the_reference():
    from servelab.analysis.warnings import WarningKind

    page = (DOCS / "errors.md").read_text()
    missing = [kind.value for kind in WarningKind if f"| `{kind.value}` |" not in page]
    assert not missing, f"warnings missing from docs/errors.md: {missing}"


def test_the_database_schema_is_the_codes():
    from servelab.results.database import SCHEMA

    assert SCHEMA.strip() in (DOCS / "results.md").read_text(), (
        "docs/results.md's schema differs from servelab.results.database.SCHEMA"
    )


def test_the_readmes_sample_is_part_of_the_tutorials_run() -> None:
    """The README shows an excerpt of the output the tutorial shows whole (one run, in
    docs/samples/quick.txt, which the tutorial includes): they cannot disagree."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```text\n", 1)[1].split("```", 1)[0]
    shown = [line for line in block.splitlines() if line != "…"]
    run = (DOCS / "samples" / "quick.txt").read_text().splitlines()
    assert len(shown) > 10 and all(line in run for line in shown)
    assert '--8<-- "docs/samples/quick.txt"' in (DOCS / "quickstart.md").read_text()
    assert len(readme.splitlines()) < 100  # a front door; the rest is in the guides
