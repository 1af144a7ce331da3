"""The CI files: actionlint on the action (action.yml), the release workflow and every
workflow the docs show; the GitLab template parsed, running the same `servelab check`
line as the action; the docs include these files rather than copies of them.

actionlint is a Go module at a pinned version, built into servelab's cache by `servelab
setup --with test`. It checks a workflow's expressions, its actions' inputs and its
runner labels. It reads action.yml where a workflow uses it (`uses: ./`), for its
inputs; its steps are linted as a reusable workflow made of them (its inputs as the
workflow's)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import servelab
from servelab.check import DEFAULT_BUDGET_S
from servelab.config.run import parse_duration
from servelab.config.thresholds import DEFAULT_THRESHOLDS
from servelab.host.paths import cache_dir

ROOT = Path(__file__).resolve().parent.parent
ACTIONLINT_VERSION = "1.7.12"  # the version `servelab setup --with test` builds
ACTION = ROOT / "action.yml"
GITLAB = ROOT / "ci" / "servelab.gitlab-ci.yml"
# How the docs' workflows name this repository's action (docs/ci.md).
ACTION_REF = re.compile(r"servelab/servelab@v[\w.]+")


def actionlint() -> Path:
    found = cache_dir() / "go" / "bin" / f"actionlint-v{ACTIONLINT_VERSION}"
    if not found.is_file():
        pytest.fail(f"actionlint {ACTIONLINT_VERSION} is not built in {found.parent} "
                    "(fix: servelab setup --with test)")
    return found


def shown_files(suffix: str) -> list[Path]:
    """The files the docs include with `--8<--` snippets, ending in ``suffix``."""
    found = set()
    for page in (ROOT / "docs").rglob("*.md"):
        for name in re.findall(r'^--8<-- "([^"]+)"', page.read_text(), re.MULTILINE):
            if name.endswith(suffix):
                found.add(ROOT / name)
    return sorted(found)


def shown_workflows() -> list[Path]:
    """The GitHub workflows the docs show (a file with jobs and triggers)."""
    return [path for path in shown_files(".yml")
            if {"jobs", True} <= set(yaml.safe_load(path.read_text()) or {})]  # `on:` is True


def action_as_workflow() -> dict:
    """action.yml's steps as a reusable workflow's job, its inputs the workflow's: what
    actionlint checks of a workflow (expressions, the actions' inputs) on the action."""
    action = yaml.safe_load(ACTION.read_text())
    return {
        "name": "action.yml's steps",
        "on": {"workflow_call": {"inputs": {
            name: {"type": "string", "required": bool(spec.get("required")),
                   **({"default": spec["default"]} if "default" in spec else {})}
            for name, spec in action["inputs"].items()
        }}},
        "jobs": {"steps": {"runs-on": "ubuntu-24.04", "steps": action["runs"]["steps"]}},
    }


def test_actionlint_passes_the_action_the_release_and_the_docs_workflows(
    tmp_path: Path,
) -> None:
    repository = tmp_path / "repo"
    workflows = repository / ".github" / "workflows"
    workflows.mkdir(parents=True)
    shutil.copy(ACTION, repository / "action.yml")
    shutil.copy(ROOT / ".github" / "workflows" / "release.yml", workflows / "release.yml")
    (workflows / "action-steps.yml").write_text(yaml.safe_dump(action_as_workflow()))
    shown = shown_workflows()
    assert {p.name for p in shown} >= {"github-workflow.yml", "history-github.yml"}
    for path in shown:  # this repository's action, where the docs name its release
        text = path.read_text()
        assert ACTION_REF.search(text) or "servelab" in text, path
        (workflows / f"docs-{path.name}").write_text(ACTION_REF.sub("./", text))
    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    done = subprocess.run(
        [str(actionlint()), "-no-color"], cwd=repository, capture_output=True, text=True,
        timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # It reads action.yml where a workflow uses it: an input it lacks is an error.
    bad = workflows / "docs-github-workflow.yml"
    bad.write_text(bad.read_text().replace("app: shop.wsgi:app", "application: shop.wsgi:app"))
    done = subprocess.run([str(actionlint()), "-no-color", str(bad)], cwd=repository,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1 and 'input "application" is not defined' in done.stdout


def command_line(script: str) -> str:
    """The `servelab check` line of a script."""
    [line] = [line.strip() for line in script.splitlines()
              if line.strip().startswith("servelab check ")]
    return line


def test_the_gitlab_template_runs_the_actions_check_with_the_same_inputs() -> None:
    template = yaml.safe_load(GITLAB.read_text())
    job = template["servelab-check"]
    action = yaml.safe_load(ACTION.read_text())
    [step] = [s for s in action["runs"]["steps"] if s.get("id") == "check"]
    # One command, two CI systems: the same line, reading the same variables.
    assert command_line("\n".join(job["script"])) == command_line(step["run"])
    variables = {**template["variables"], **job["variables"]}
    used = set(re.findall(r"\$(SERVELAB_\w+)", command_line(step["run"])))
    assert used <= set(step["env"]) and used <= set(variables)
    # The same defaults: the action's inputs and the template's variables, servelab's own.
    inputs = action["inputs"]
    for name, variable in (("thresholds", "SERVELAB_THRESHOLDS"), ("budget", "SERVELAB_BUDGET"),
                           ("inconclusive", "SERVELAB_INCONCLUSIVE"),
                           ("results", "SERVELAB_RESULTS"), ("app-dir", "SERVELAB_APP_DIR")):
        assert inputs[name]["default"] == variables[variable], name
    assert tuple(inputs["thresholds"]["default"].splitlines()) == DEFAULT_THRESHOLDS
    assert parse_duration(inputs["budget"]["default"]) == DEFAULT_BUDGET_S
    assert inputs["inconclusive"]["default"] == "fail"
    # Versioned with servelab; the artifacts and the JUnit report are where the check
    # writes them.
    assert template["variables"]["SERVELAB_VERSION"] == servelab.__version__
    results = variables["SERVELAB_RESULTS"]
    assert job["artifacts"]["paths"] == [f"{results}/"] and job["artifacts"]["when"] == "always"
    assert job["artifacts"]["reports"]["junit"] == f"{results}/junit.xml"
    assert job["cache"]["paths"] == [".servelab-cache/"]
    assert variables["SERVELAB_CACHE"] == "$CI_PROJECT_DIR/.servelab-cache"


def test_the_docs_include_the_files_the_tests_run() -> None:
    page = (ROOT / "docs" / "ci.md").read_text()
    for name in ("docs/ci/github-workflow.yml", "docs/ci/gitlab-ci.yml",
                 "docs/ci/check-summary.md", "ci/servelab.gitlab-ci.yml"):
        assert f'--8<-- "{name}"' in page, name
    # No workflow copied into the page: every yaml block is a snippet of a file.
    blocks = re.findall(r"```yaml\n(.*?)```", page, re.DOTALL)
    assert blocks and all(block.strip().startswith('--8<-- "') for block in blocks), blocks
    # The docs' GitLab config includes the template at servelab's version.
    config = yaml.safe_load((ROOT / "docs" / "ci" / "gitlab-ci.yml").read_text())
    [included] = config["include"]
    assert included["remote"].endswith(f"/v{servelab.__version__}/ci/servelab.gitlab-ci.yml")
    assert ACTION_REF.search((ROOT / "docs" / "ci" / "github-workflow.yml").read_text())
    assert f"servelab/servelab@v{servelab.__version__}" in (
        ROOT / "docs" / "ci" / "github-workflow.yml").read_text()


def test_the_steps_by_hand_check_what_the_action_checks_by_default() -> None:
    from support import servelab_lines

    workflow = yaml.safe_load((ROOT / "docs" / "ci" / "github-by-hand.yml").read_text())
    steps = workflow["jobs"]["servelab"]["steps"]
    [line] = servelab_lines([s["run"] for s in steps if s.get("name") == "servelab check"],
                            {"GITHUB_BASE_REF": "main"})
    inputs = yaml.safe_load(ACTION.read_text())["inputs"]
    given = {name: [line[i + 1] for i, word in enumerate(line) if word == name]
             for name in ("--app-dir", "--baseline-ref", "--fail-if", "--results")}
    assert given == {
        "--app-dir": [inputs["app-dir"]["default"]],
        "--baseline-ref": ["origin/main"],  # the action's default, for a pull request to main
        "--fail-if": inputs["thresholds"]["default"].splitlines(),
        "--results": [inputs["results"]["default"]],
    }
    assert "--budget" not in line  # servelab check's own default, which the action's is


def test_the_setup_step_runs_the_commands_servelab_setup_leaves_to_root(tmp_path: Path) -> None:
    """Not root (a GitHub runner's user): servelab setup does the rest and prints the
    commands it leaves to sudo (exit 3); the step runs them and sets up once more."""
    [step] = [s for s in yaml.safe_load(ACTION.read_text())["runs"]["steps"]
              if s.get("name") == "servelab setup"]
    fakes = tmp_path / "bin"
    fakes.mkdir()
    calls = tmp_path / "calls"
    for name, body in {
        "id": 'echo 1001',
        "sudo": f'echo "sudo $*" >> {calls}',
        "servelab": (f'echo "servelab $*" >> {calls}\n'
                     f'if [ ! -e {tmp_path}/again ]; then touch {tmp_path}/again\n'
                     '  echo "Left to do: run these, then \\`servelab setup\\` again:"\n'
                     '  echo "  sudo apt-get update"\n'
                     '  echo "  sudo apt-get install -y nginx-light"\n'
                     '  exit 3\nfi\necho "servelab is set up for: core, replay (1 s)"'),
    }.items():
        (fakes / name).write_text(f"#!/bin/sh\n{body}\n")
        (fakes / name).chmod(0o755)
    script = tmp_path / "step.sh"
    script.write_text(step["run"])
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        env={"PATH": f"{fakes}:/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path),
             "SERVELAB_SETUP_PARTS": "replay"},
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().splitlines() == [
        "servelab setup --with replay",
        "sudo apt-get update",
        "sudo apt-get install -y nginx-light",
        "servelab setup --with replay",
    ]
