"""servelab's extras: a missing one is one line naming it; doctor lists them as optional."""

from __future__ import annotations

import importlib.util

import pytest

from servelab.errors import SpecError
from servelab.host import extras


def test_an_installed_extra_passes_and_doctor_says_ok() -> None:
    extras.require_extra("charts", "the report's charts")
    assert [c.status for c in extras.extra_checks()] == ["ok"] * len(extras.EXTRAS)


def test_a_missing_extra_is_one_line_naming_it(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "django" else real(name)
    )
    with pytest.raises(SpecError) as caught:
        extras.require_extra("django", "the Django reference app")
    assert caught.value.problem == (
        "the Django reference app needs servelab's 'django' extra (django not installed)"
    )
    assert caught.value.fix == "servelab setup --with postgres"
    check = next(c for c in extras.extra_checks() if c.name == "extra: servelab[django]")
    assert (check.status, check.found) == ("warn", "not installed (django; optional)")
