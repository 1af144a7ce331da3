"""The baseline version of the app: a directory as given, or a git revision checked out
with ``git worktree`` into a temporary directory, removed afterwards (also on Ctrl-C).

The user's own checkout is never touched: a dirty work tree is refused rather than
stashed, and the worktree is detached (no branch is created or moved).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from servelab.config.stack import AppSpec
from servelab.errors import SpecError


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120,
        check=False, stdin=subprocess.DEVNULL,
    )


def repository_of(app_dir: Path) -> Path:
    """The top of the git work tree holding ``app_dir`` (SpecError when there is none)."""
    if shutil.which("git") is None:
        raise SpecError("--baseline-ref needs git, which is not installed", "apt-get install git")
    done = git(app_dir, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise SpecError(
            f"--baseline-ref needs the app in a git repository; {app_dir} is not in one",
            "give the baseline as a directory with --baseline-dir",
        )
    return Path(done.stdout.strip())


def resolve_revision(repo: Path, ref: str) -> str:
    """The commit ``ref`` names in ``repo`` (SpecError when it names none)."""
    done = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if done.returncode != 0 or not done.stdout.strip():
        raise SpecError(
            f"no git revision {ref!r} in {repo}",
            "give a branch, tag or commit that exists there (git log --oneline, git branch -a)",
        )
    return done.stdout.strip()


def require_clean(repo: Path) -> None:
    """SpecError when tracked files have uncommitted changes (the candidate must be a
    version someone can name, and servelab never stashes the user's work)."""
    done = git(repo, "status", "--porcelain", "--untracked-files=no")
    changed = [line[3:] for line in done.stdout.splitlines() if line.strip()]
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3
                                          else "")
        raise SpecError(
            f"the work tree {repo} has uncommitted changes ({shown})",
            "commit or stash them first (servelab never touches your checkout), or compare "
            "directories with --baseline-dir",
        )


@contextmanager
def git_worktree(repo: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of ``commit`` in a temporary directory; removed afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix="servelab-baseline-"))
    tree = scratch / "tree"
    try:
        done = git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
        if done.returncode != 0:
            raise SpecError(
                f"git worktree add failed: {' '.join(done.stderr.split())}",
                "check the repository with `git worktree list`",
            )
        yield tree
    finally:
        git(repo, "worktree", "remove", "--force", str(tree))
        shutil.rmtree(scratch, ignore_errors=True)
        git(repo, "worktree", "prune")


@contextmanager
def baseline_version(
    app: AppSpec, baseline_dir: Path | None, baseline_ref: str | None
) -> Iterator[tuple[Path | None, str]]:
    """The baseline's app dir while the block runs, and how reports name it."""
    if baseline_dir is not None and baseline_ref is not None:
        raise SpecError(
            "--baseline-dir and --baseline-ref both name the baseline", "give one of them"
        )
    if baseline_ref is None:
        if baseline_dir is not None and not baseline_dir.is_dir():
            raise SpecError(f"--baseline-dir {baseline_dir} is not a directory",
                            "give the directory of the baseline version's app")
        where = baseline_dir.resolve() if baseline_dir else app.app_dir
        yield where, str(where) if where else f"the same app ({app.ref})"
        return
    app_dir = (app.app_dir or Path.cwd()).resolve()
    repo = repository_of(app_dir)
    commit = resolve_revision(repo, baseline_ref)
    require_clean(repo)
    with git_worktree(repo, commit) as tree:
        yield tree / app_dir.relative_to(repo), f"{baseline_ref} at {commit[:10]}"


def describe_version(app_dir: Path | None) -> dict[str, object]:
    """What names a version of the app for its history: the commit of the repository
    holding ``app_dir`` (its committer time, and whether tracked files had uncommitted
    changes), or only the directory where it is in none."""
    where = (app_dir or Path.cwd()).resolve()
    described: dict[str, object] = {"dir": str(where)}
    if shutil.which("git") is None:
        return described
    done = git(where, "log", "-1", "--format=%H %cI")
    if done.returncode != 0 or not done.stdout.strip():
        return described
    commit, time = done.stdout.split()
    status = git(where, "status", "--porcelain", "--untracked-files=no", "--", ".")
    described.update(commit=commit, time=time, dirty=bool(status.stdout.strip()))
    return described
