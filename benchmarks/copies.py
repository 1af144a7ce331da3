"""How many times the experiment is copied, dumped, validated or checked against its
plug-ins between the command line and the measuring session, per command.

Drives the real CLI entry (``servelab.cli.main``, in-process) with pydantic's
``BaseModel.model_copy``/``model_dump``/``model_validate`` and
``servelab.prepare.checks.checked`` (and ``experiment_problems``, which it and the one
check at the end of ``api.prepare`` ask) wrapped by counters, and the session stopped at its
door: ``ExperimentSession.run`` raises a private exception before it opens the store or
starts anything (``servelab check``'s probe of both versions, which launches them, is
skipped too). Nothing is measured, no process is started; deterministic, so one run per
command is the figure.

    PYTHONPATH=src .venv/bin/python benchmarks/copies.py

Prints, per command, the experiment's model_copy / model_dump / model_validate calls,
``checked`` calls, ``experiment_problems`` calls ("asked": the plug-ins asked about a
whole experiment, ``checked``'s included), the total (copies, dumps, validations and
asks) and the other models' copy/dump/validate calls.
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel

APP = """
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
"""
KINDS = ("model_copy", "model_dump", "model_validate", "checked", "asked")
TOTAL = ("model_copy", "model_dump", "model_validate", "asked")


class AtTheDoor(BaseException):
    """Raised where measuring would begin (a BaseException: main() turns every Exception
    into an internal error)."""


@contextmanager
def counting(counts: Counter[str]) -> Iterator[None]:
    """Every model_copy/model_dump/model_validate and checked() counted in ``counts``:
    the experiment's under their own name, any other model's as 'other <name>'."""
    import servelab.prepare.checks as checks
    from servelab import session
    from servelab.config.experiment import Experiment

    def key(name: str, model: type) -> str:
        return name if issubclass(model, Experiment) else f"other {name}"

    copy, dump = BaseModel.model_copy, BaseModel.model_dump
    validate = BaseModel.__dict__["model_validate"]

    def model_copy(self: BaseModel, *args: Any, **kwargs: Any) -> Any:
        counts[key("model_copy", type(self))] += 1
        return copy(self, *args, **kwargs)

    def model_dump(self: BaseModel, *args: Any, **kwargs: Any) -> Any:
        counts[key("model_dump", type(self))] += 1
        return dump(self, *args, **kwargs)

    def model_validate(cls: type[BaseModel], *args: Any, **kwargs: Any) -> Any:
        counts[key("model_validate", cls)] += 1
        return validate.__func__(cls, *args, **kwargs)

    original_checked, original_problems = checks.checked, checks.experiment_problems

    def checked(*args: Any, **kwargs: Any) -> Any:
        counts["checked"] += 1
        return original_checked(*args, **kwargs)

    def experiment_problems(*args: Any, **kwargs: Any) -> Any:
        counts["asked"] += 1
        return original_problems(*args, **kwargs)

    def door(self: Any) -> Any:
        raise AtTheDoor

    # ``from servelab.prepare.checks import checked`` binds the name in each importer:
    # every servelab module loaded so far is patched too.
    bound = [
        module for name, module in list(sys.modules.items())
        if name.startswith("servelab") and getattr(module, "checked", None) is original_checked
    ]
    session_run = session.ExperimentSession.run
    import servelab.check as check

    probe = check.probe_both
    BaseModel.model_copy = model_copy  # type: ignore[method-assign]
    BaseModel.model_dump = model_dump  # type: ignore[method-assign]
    BaseModel.model_validate = classmethod(model_validate)  # type: ignore[assignment,method-assign]
    for module in bound:
        module.checked = checked  # type: ignore[attr-defined]
    checks.experiment_problems = experiment_problems
    session.ExperimentSession.run = door  # type: ignore[method-assign]
    check.probe_both = lambda experiment, timeout_s: None
    try:
        yield
    finally:
        BaseModel.model_copy = copy  # type: ignore[method-assign]
        BaseModel.model_dump = dump  # type: ignore[method-assign]
        BaseModel.model_validate = validate  # type: ignore[method-assign]
        for module in bound:
            module.checked = original_checked  # type: ignore[attr-defined]
        checks.experiment_problems = original_problems
        session.ExperimentSession.run = session_run  # type: ignore[method-assign]
        check.probe_both = probe


def drive(argv: list[str]) -> Counter[str]:
    """The counts of ``servelab argv``, which must reach the session's door."""
    from servelab.cli import main

    counts: Counter[str] = Counter()
    sys.argv = ["servelab", *argv]
    with counting(counts):
        try:
            main()
        except AtTheDoor:
            return counts
        except SystemExit as exc:
            said = f"servelab {' '.join(argv)} exited {exc.code} before measuring"
            raise SystemExit(said) from None
    raise SystemExit(f"servelab {' '.join(argv)} returned before measuring")


def commands(root: Path) -> dict[str, list[str]]:
    from servelab.config.examples import example_text

    for name in ("web", "base"):
        (root / name).mkdir()
        (root / name / "shop.py").write_text(APP)
    (root / "exp.toml").write_text(example_text("port-vs-socket"))
    results = ["--results", str(root / "results")]
    return {
        "study quick": ["study", "quick", *results],
        "study quick --precision 5 --order random": [
            "study", "quick", "--precision", "5", "--order", "random", *results,
        ],
        "check (--baseline-dir)": [
            "check", "--app", "shop:app", "--app-dir", str(root / "web"),
            "--baseline-dir", str(root / "base"), *results,
        ],
        "run exp.toml": ["run", str(root / "exp.toml"), *results],
    }


def main() -> int:
    rows: list[tuple[str, Counter[str]]] = []
    with tempfile.TemporaryDirectory(prefix="servelab-copies-") as tmp:
        for label, argv in commands(Path(tmp)).items():
            rows.append((label, drive(argv)))

    def show(counts: Counter[str]) -> str:
        return "  ".join(f"{counts[k]:>{len(k)}}" for k in KINDS)

    print(f"{'command':<42} {'  '.join(KINDS)}  total  other models")
    for label, counts in rows:
        total = sum(counts[k] for k in TOTAL)
        other = sum(v for k, v in counts.items() if k.startswith("other "))
        print(f"{label:<42} {show(counts)}  {total:>5}  {other:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
