"""The GitHub Action (action.yml), run for real: its steps as the runner runs them
(tests/action_runner.py), with the inputs the docs' workflow gives it
(docs/ci/github-workflow.yml), in a fresh home, servelab installed by the action's own
install step into a venv of its own from the wheel built from this checkout, against a
temporary git repository: an app at the pull request's base and a version of it at its
head.

What cannot run without GitHub is stood in for, each saying how:
- actions/setup-python: this machine's Python (the workflow asks for 3.12; the machine
  has the one the test suite runs on);
- actions/cache: nothing to restore, because SERVELAB_CACHE points at this machine's
  cache, where `servelab setup` built oha before, as a restored cache would hold it (a
  cold one is an oha build of minutes);
- actions/upload-artifact: the directory copied where an artifact would be;
- actions/github-script: its script run by node against a stand-in for GitHub's API
  (a list of comments in a file), twice, to see one comment updated, not two added.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import xmlschema
import yaml
from action_runner import ActionRun, run_action
from support import CLEAN_ENV, HASHING_APP, git

from servelab.host.paths import cache_dir

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "tests" / "fixtures" / "schemas" / "junit.xsd"
# Write the failing run's job summary as the docs' sample (docs/ci.md includes it):
# SERVELAB_UPDATE_SAMPLES=1.
SAMPLE = ROOT / "docs" / "ci" / "check-summary.md"
UPDATE_SAMPLES = os.environ.get("SERVELAB_UPDATE_SAMPLES") == "1"
# A fake of GitHub's API for actions/github-script: the comments of one pull request.
GITHUB_SCRIPT = """
const fs = require('fs');
const store = process.env.COMMENTS;
const read = () => JSON.parse(fs.readFileSync(store, 'utf8'));
const write = (comments) => fs.writeFileSync(store, JSON.stringify(comments));
const github = {
  paginate: async (method, args) => (await method(args)).data,
  rest: {issues: {
    listComments: async () => ({data: read()}),
    createComment: async ({body}) => {
      const c = read(); c.push({id: c.length + 1, body}); write(c); },
    updateComment: async ({comment_id, body}) => {
      write(read().map((c) => c.id === comment_id ? {...c, body} : c)); },
  }},
};
const context = {repo: {owner: 'o', repo: 'r'}, issue: {number: 7}};
(async () => { %s })().then((r) => console.log(r))
  .catch((e) => { console.error(e); process.exit(1); });
"""


def docs_inputs() -> dict[str, str]:
    """The inputs docs/ci/github-workflow.yml gives the action."""
    workflow = yaml.safe_load((ROOT / "docs" / "ci" / "github-workflow.yml").read_text())
    [step] = [s for s in workflow["jobs"]["servelab"]["steps"]
              if s.get("uses", "").startswith("servelab/servelab@")]
    return {name: str(value).lower() if isinstance(value, bool) else str(value)
            for name, value in step["with"].items()}


# Hashes per request: enough that the app's work, not nginx's and the server's, is most of
# a request's cost (at 3000, twice the work read only -26 % requests/s here).
ROUNDS = 15000


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone whose origin/main has the app (`shop.wsgi:app`, CPU work per request) and
    two pull-request branches: `slower` doing four times the work, `same` only a comment."""
    root = tmp_path_factory.mktemp("project")
    origin, clone = root / "origin.git", root / "clone"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True,
                   capture_output=True)
    (clone / "shop").mkdir()
    (clone / "shop" / "__init__.py").write_text("")
    wsgi = clone / "shop" / "wsgi.py"
    wsgi.write_text(HASHING_APP.format(rounds=ROUNDS, note="the base"))
    git(clone, "add", ".")
    git(clone, "commit", "-q", "-m", "the shop")
    git(clone, "push", "-q", "origin", "HEAD:main")
    git(clone, "checkout", "-q", "-b", "same")
    wsgi.write_text(HASHING_APP.format(rounds=ROUNDS, note="a comment, nothing slower"))
    git(clone, "commit", "-q", "-am", "a harmless change")
    git(clone, "checkout", "-q", "-b", "slower", "main")
    # Four times, not twice: in the suite, beside two other tests on 2 CPUs, twice the work
    # read -41.9 % [-54.9, -25.2] and stayed undecided against -30 % (alone: -49 %).
    wsgi.write_text(HASHING_APP.format(rounds=4 * ROUNDS, note="four times the work"))
    git(clone, "commit", "-q", "-am", "four times the work per request")
    git(clone, "fetch", "-q", "origin")
    return clone


def stand_ins(artifacts: Path, comments: Path) -> dict:
    def setup_python(given: dict[str, str], env: dict[str, str]) -> dict[str, str]:
        assert given["update-environment"] == "false"
        return {"python-path": sys.executable, "python-version": sys.version.split()[0]}

    def cache(given: dict[str, str], env: dict[str, str]) -> dict[str, str]:
        assert given["path"] == env["SERVELAB_CACHE"]  # the cache servelab setup fills
        assert given["key"].startswith("servelab-") and given["restore-keys"]
        return {"cache-hit": "true"}

    def upload(given: dict[str, str], env: dict[str, str]) -> dict[str, str]:
        kept = Path(env["GITHUB_WORKSPACE"]) / given["path"]
        if not kept.exists():
            assert given["if-no-files-found"] == "ignore"
            return {}
        shutil.copytree(kept, artifacts / given["name"], dirs_exist_ok=True)
        return {"artifact-id": "1", "artifact-url": f"https://github.invalid/{given['name']}"}

    def github_script(given: dict[str, str], env: dict[str, str]) -> dict[str, str]:
        script = artifacts.parent / "github-script.js"
        script.write_text(GITHUB_SCRIPT % given["script"])
        done = subprocess.run(["node", str(script)], env={**env, "COMMENTS": str(comments)},
                              cwd=env["GITHUB_WORKSPACE"], capture_output=True, text=True,
                              check=True, timeout=60)
        return {"result": done.stdout.strip()}

    return {"actions/setup-python": setup_python, "actions/cache": cache,
            "actions/upload-artifact": upload, "actions/github-script": github_script}


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The runner's home and temp dir, fresh for this module and shared by its three jobs,
    so that the install step's pip fetches servelab's dependencies once (GitHub gives
    each job empty ones)."""
    root = tmp_path_factory.mktemp("runner")
    (root / "home").mkdir()
    (root / "temp").mkdir()
    return root / "home", root / "temp"


def pull_request(project: Path, branch: str, runner: tuple[Path, Path], tmp_path: Path,
                 wheel: Path, **inputs: str) -> tuple[ActionRun, Path, Path]:
    """The action on the pull request ``branch`` -> main: its run, the artifacts' dir and
    the comments' file."""
    git(project, "checkout", "-q", branch)
    shutil.rmtree(project / "servelab-results", ignore_errors=True)
    home, temp = runner
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir(exist_ok=True)
    comments = tmp_path / "comments.json"
    if not comments.exists():
        comments.write_text("[]")
    env = {  # a runner's environment: a fresh home; the machine's tools
        **{k: v for k, v in CLEAN_ENV.items() if not k.startswith(("GITHUB_", "SERVELAB_"))},
        "HOME": str(home), "PATH": os.environ["PATH"].replace(f"{Path(sys.executable).parent}:",
                                                              ""),
        "SERVELAB_CACHE": str(cache_dir()),  # the "restored" cache (see the module's doc)
        "CI": "true", "GITHUB_ACTIONS": "true",
    }
    run = run_action(
        ROOT / "action.yml",
        {**docs_inputs(), "servelab-source": str(wheel), **inputs},
        workspace=project, temp=temp, env=env,
        github={"base_ref": "main", "head_ref": branch, "event_name": "pull_request",
                "token": "not-a-token", "event": {"pull_request": {"number": 7}}},
        stand_ins=stand_ins(artifacts, comments),
    )
    return run, artifacts, comments


# Thresholds the test's two heads answer within a short budget on 2 shared CPUs: twice the
# work per request read -49 % [-54.3, -43.1] requests/s here, far beyond -30 %; identical
# versions beside other engineers' work read as far as -10.6 % [-22.4, +3.0], which a
# -20 % threshold left undecided. The docs' default (rps < -5%) needs the 3 minutes a
# small runner takes to decide it (docs/ci.md, Limits); here -d 2 (seconds per version
# per round, default 3 in turns) keeps each round short. The budget is a cap: at 90 s,
# beside other engineers' benchmarks, both heads took 6 starts and were decided only at it
# (-43.0 % [-50.7, -34.2]; identical: held), in 91 and 95 s.
FAST = {"thresholds": "rps < -30%\nerrors > 0", "budget": "2m", "check-options": "-d 2"}


def test_a_slower_pull_request_fails_with_its_summary_outputs_and_comment(
    project: Path, runner: tuple[Path, Path], tmp_path: Path, servelab_wheel: Path,
    no_leftover_processes,
) -> None:
    run, artifacts, comments = pull_request(project, "slower", runner, tmp_path, servelab_wheel,
                                            **FAST)
    check = next(s for s in run.steps if s.id == "check")
    assert check.outcome == "failure" and check.returncode == 1, run.log[-6000:]
    assert run.outputs["verdict"] == "crossed" and run.outputs["exit-code"] == "1"
    [rps, errors] = json.loads(run.outputs["thresholds"])
    assert (rps["threshold"], rps["verdict"]) == ("rps < -30%", "crossed")
    assert rps["high"] < -30 and rps["low"] <= rps["change"] <= rps["high"]
    assert (errors["verdict"], errors["change"]) == ("held", 0)
    assert run.outputs["changes"].splitlines()[0].startswith("rps < -30%: ")
    # The job summary: the check's table, then where the results are.
    summary = run.summary
    assert summary.startswith("### servelab check: ❌ failed: a threshold is crossed\n")
    assert "| `rps < -30%` | ❌ crossed |" in summary
    assert "against baseline `origin/main at " in summary
    assert "of a 2m budget; exit code 1." in summary
    assert "Candidate `. at " in summary and "Report: `servelab report servelab-results/" in summary
    assert "[servelab-check artifact](https://github.invalid/servelab-check)" in summary
    assert run.outputs["summary"] in summary
    # The artifact: the results, the JUnit file and the summary.
    kept = artifacts / "servelab-check"
    xmlschema.XMLSchema(SCHEMA).validate(str(kept / "junit.xml"))
    assert (kept / "servelab.db").is_file()
    assert (kept / "summary.md").read_text() == run.outputs["summary"]
    # servelab is on PATH for the job's later steps, from the action's own venv.
    assert shutil.which("servelab", path=run.env["PATH"]).startswith(str(runner[1]))
    # The comment on the pull request: added once, with the hidden marker.
    [comment] = json.loads(comments.read_text())
    assert comment["body"] == "<!-- servelab check: servelab-check -->\n" + run.outputs["summary"]
    assert git(project, "worktree", "list", "--porcelain").count("worktree ") == 1
    if UPDATE_SAMPLES:  # the docs' sample: this run's job summary, as GitHub shows it
        SAMPLE.write_text(summary.replace(str(project), "/home/runner/work/shop/shop"))


def test_an_unchanged_pull_request_passes_and_updates_the_comment(
    project: Path, runner: tuple[Path, Path], tmp_path: Path, servelab_wheel: Path,
    no_leftover_processes,
) -> None:
    comments = tmp_path / "comments.json"
    comments.write_text(json.dumps([
        {"id": 1, "body": "someone's review"},
        {"id": 2, "body": "<!-- servelab check: servelab-check -->\nan earlier push's"},
    ]))
    run, _, comments = pull_request(project, "same", runner, tmp_path, servelab_wheel, **FAST)
    assert run.failed is None, run.log[-6000:]
    assert run.outputs["verdict"] == "held" and run.outputs["exit-code"] == "0"
    assert "### servelab check: ✅ passed: no threshold crossed" in run.summary
    review, mine = json.loads(comments.read_text())
    assert review["body"] == "someone's review"
    assert mine["id"] == 2 and mine["body"].endswith(run.outputs["summary"])


def test_a_bad_input_is_one_line_in_the_log_and_in_the_summary(
    project: Path, runner: tuple[Path, Path], tmp_path: Path, servelab_wheel: Path
) -> None:
    run, _, _ = pull_request(project, "same", runner, tmp_path, servelab_wheel,
                             thresholds="rps < -5%\nrps <= 5")
    check = next(s for s in run.steps if s.id == "check")
    assert check.returncode == 2
    [line] = [x for x in check.log.splitlines() if "servelab: error:" in x]
    assert "invalid threshold 'rps <= 5'" in line and "Traceback" not in check.log
    assert f"### servelab check: ⛔ could not run\n\n{line.split('error: ', 1)[1]}\n" in run.summary
    assert run.outputs["verdict"] == "error" and run.outputs["exit-code"] == "2"
