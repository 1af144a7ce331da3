"""The environments of bisect's lock-file mode: one virtualenv per lock state, built
once, in a temporary directory removed afterwards (also on Ctrl-C).

Each is made with servelab's own interpreter (``venv --without-pip``) and filled by pip
(``--no-deps``: a lock is complete; from ``--wheelhouse`` only, with ``--no-index``,
else from the index pip is configured for). What a lock does not pin (the app servers,
when the app's lock has none) comes from servelab's own environment, listed after the
state's own packages (a ``.pth`` file): the same for every state, so only the lock's
differences differ.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from servelab.errors import ServelabError

INSTALL_TIMEOUT_S = 600.0
FALLBACK_PTH = "zz_servelab_fallback.pth"  # sorted last: the state's own packages win


class LockInstallError(ServelabError):
    """A state's environment could not be built (what pip said, shortened)."""


class LockEnvironments:
    def __init__(self, root: Path, wheelhouse: Path | None, say: Callable[[str], None]):
        self.root = root
        self.wheelhouse = wheelhouse
        self.say = say
        self.built: dict[int, Path] = {}

    def python(self, state: int, requirements: Sequence[str]) -> Path:
        """The interpreter of ``state``'s environment, built the first time it is asked."""
        if state not in self.built:
            self.built[state] = self._build(state, requirements)
        return self.built[state]

    def _build(self, state: int, requirements: Sequence[str]) -> Path:
        self.say(f"building the environment of lock state {state} "
                 f"({len(requirements)} packages)")
        where = self.root / f"state-{state}"
        _run([sys.executable, "-m", "venv", "--without-pip", str(where)], "venv")
        python = where / "bin" / "python"
        listed = where / "requirements.txt"
        listed.write_text("\n".join(requirements) + "\n")
        source = (["--no-index", "--find-links", str(self.wheelhouse)]
                  if self.wheelhouse is not None else [])
        _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
              "--disable-pip-version-check", "--quiet", *source, "-r", str(listed)],
             "pip install")
        purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                        "'purelib'))"], "python").strip()
        own = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
        (Path(purelib) / FALLBACK_PTH).write_text("\n".join(own) + "\n")
        return python


def _run(command: list[str], what: str) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=INSTALL_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise LockInstallError(f"{what} took longer than {INSTALL_TIMEOUT_S:g} s",
                                "check the wheelhouse or the index") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        raise LockInstallError(f"{what} failed: {said[-1] if said else done.returncode}",
                                "check that every pinned version is in the wheelhouse or "
                                "the index", detail=done.stderr[-2000:])
    return done.stdout


@contextmanager
def lock_environments(
    wheelhouse: Path | None, say: Callable[[str], None]
) -> Iterator[LockEnvironments]:
    root = Path(tempfile.mkdtemp(prefix="servelab-lock-"))
    try:
        yield LockEnvironments(root, wheelhouse, say)
    finally:
        shutil.rmtree(root, ignore_errors=True)
