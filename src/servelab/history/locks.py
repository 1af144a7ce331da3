"""Two lock files' differences as steps to bisect: which dependency change made the app
slower (uv#11525 asks for it; no tool does it).

A lock file here is requirements-style, every package pinned: `pip freeze`,
`pip-compile`, `uv pip compile` or `uv export` output (hashes, markers and `# via`
comments are fine). The differences (a package upgraded, downgraded, added, removed)
are sorted by name; state k is the good lock with the first k of them applied, so
state 0 is the good lock and the last state the bad one, and a bisection over the
states names the change that made it slower. Pure: building the states' environments is
``history.lock_run``'s.

One change at a time can pair versions that were never locked together (a new version
of one package that needs a new version of another). Such a state may not install or
start; the step is then unknown, and the answer says between which changes it stayed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from servelab.errors import SpecError

_FIX = "give a requirements-style lock file (pip freeze, pip-compile, uv pip compile or uv export)"


@dataclass(frozen=True)
class Pin:
    name: str  # normalised (PEP 503)
    line: str  # the requirement as pip takes it, without hashes: "Django==5.0.1"
    version: str  # what it pins, for the answer ("5.0.1"; the whole line if not ==)


@dataclass(frozen=True)
class Change:
    name: str
    before: Pin | None  # None: added
    after: Pin | None  # None: removed

    def describe(self) -> str:
        if self.before is None:
            return f"{self.name} added ({self.after.version if self.after else '?'})"
        if self.after is None:
            return f"{self.name} removed (was {self.before.version})"
        return f"{self.name} {self.before.version} -> {self.after.version}"


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) with backslash continuations joined and comments dropped."""
    lines: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined = (pending + line).strip()
        pending = ""
        if joined:
            lines.append((start, joined))
    if pending.strip():
        lines.append((start, pending.strip()))
    return lines


def parse_lock(text: str, source: str) -> dict[str, Pin]:
    """A lock file's pins by normalised name; SpecError (one line) naming the first line
    that is not a pinned requirement."""
    pins: dict[str, Pin] = {}
    for number, line in _logical_lines(text):
        requirement_text = " ".join(w for w in line.split() if not w.startswith("--hash"))
        if requirement_text.startswith("-"):
            if requirement_text.startswith(("--index-url", "--extra-index-url", "-i ")):
                continue  # where pip looks; bisect's own --wheelhouse or pip's config decides
            raise SpecError(f"{source}:{number}: {requirement_text.split()[0]} is not a "
                            "pinned package", _FIX)
        try:
            requirement = Requirement(requirement_text)
        except InvalidRequirement as exc:
            said = str(exc).splitlines()[0]  # packaging points at the column below it
            raise SpecError(f"{source}:{number}: not a requirement ({said}: "
                            f"{requirement_text})", _FIX) from None
        if requirement.url:
            raise SpecError(f"{source}:{number}: {requirement.name} is a URL, not a version",
                            "pin it to a version (name==1.2.3) from an index or a wheelhouse")
        specifiers = list(requirement.specifier)
        exact = [s.version for s in specifiers if s.operator in ("==", "===")]
        if not exact:
            raise SpecError(f"{source}:{number}: {requirement.name} is not pinned "
                            f"({requirement_text})", "a lock file pins every package: name==1.2.3")
        name = canonicalize_name(requirement.name)
        pins[name] = Pin(name, requirement_text, exact[0])
    if not pins:
        raise SpecError(f"{source} pins no package", _FIX)
    return pins


def read_lock(path: Path) -> dict[str, Pin]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"cannot read the lock file {path}: {exc.strerror}",
                        "give a readable requirements-style lock file") from None
    return parse_lock(text, str(path))


def lock_changes(good: dict[str, Pin], bad: dict[str, Pin]) -> list[Change]:
    """Every package whose pin differs, sorted by name."""
    return [
        Change(name, good.get(name), bad.get(name))
        for name in sorted(good.keys() | bad.keys())
        if (good.get(name) and good[name].line) != (bad.get(name) and bad[name].line)
    ]


def lock_state(good: dict[str, Pin], changes: Sequence[Change], applied: int) -> list[str]:
    """The requirement lines of the good lock with the first ``applied`` changes made."""
    pins = dict(good)
    for change in changes[:applied]:
        if change.after is None:
            pins.pop(change.name, None)
        else:
            pins[change.name] = change.after
    return [pins[name].line for name in sorted(pins)]


def state_label(changes: Sequence[Change], applied: int) -> str:
    """A state's name in the steps: how many changes it has, and the last one."""
    if applied == 0:
        return "0 (the good lock)"
    return f"{applied}: {changes[applied - 1].describe()}"
