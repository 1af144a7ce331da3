"""The terminal's compact view (what a session ends on by default) and its whole report
(-v, `results show`)."""

from __future__ import annotations

import io

from rich.console import Console

from servelab.report.answer import build_answer
from servelab.report.terminal import MORE_DETAIL, render_terminal

from .common import load, sections


def _text(name: str, *, detail: bool, width: int = 100) -> str:
    terminal = io.StringIO()
    Console(file=terminal, width=width).print(render_terminal(sections(name), detail=detail))
    return terminal.getvalue()


def test_the_compact_view_is_the_glance_and_the_answer_last() -> None:
    compact, whole = _text("quick", detail=False), _text("quick", detail=True)
    assert len(compact.splitlines()) <= 40 < len(whole.splitlines())
    assert "Seed-style tables" in whole and "Seed-style tables" not in compact
    assert "Environment" not in compact and MORE_DETAIL in compact
    assert compact.index("At a glance") < compact.index("Answer")
    flat = " ".join(compact.split())
    for workload in build_answer(load("quick").analysis).workloads:
        for line in workload.lines:
            assert " ".join(line.text().split()) in flat
    # The answer is on requests/s here: the glance says each variant's verdict too.
    assert "vs baseline" in compact and "+47.1 % no significant diff." in compact


def test_the_compact_view_shows_the_failures_when_requests_failed() -> None:
    compact = _text("rate-steps", detail=False, width=160)
    assert "Failures and their causes" in compact and "timeout" in compact
    assert "Failures and their causes" not in _text("quick", detail=False)  # none failed
    assert compact.rstrip().endswith(_text("rate-steps", detail=True, width=160).rstrip()[-200:])
