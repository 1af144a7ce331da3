"""servelab's optional parts (pyproject's extras): the modules each brings, the one line
said when an experiment needs a missing one, and how ``servelab doctor`` lists them.

The core (``pip install servelab``) needs no compiler and measures the built-in FastAPI
app and any app of the user's with gunicorn and uvicorn behind nginx; the extras add the
other app servers, Apache's mod_wsgi, the Django reference app and the report's charts.
"""

from __future__ import annotations

import importlib.util

from servelab.errors import SpecError
from servelab.host.doctor import Check
from servelab.host.parts import part_with_extra, setup_command

# extra -> the modules it installs into servelab's Python. The app servers' extras are
# each server's own (``AppServer.extra``, checked in the app's Python).
EXTRAS: dict[str, tuple[str, ...]] = {
    "django": ("django", "psycopg"),
    "charts": ("matplotlib",),
}


def install_line(extra: str) -> str:
    return setup_command(part_with_extra(extra))


def missing_modules(extra: str) -> list[str]:
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def require_extra(extra: str, needed_by: str) -> None:
    """SpecError (one line naming the extra) unless ``extra``'s modules are installed."""
    missing = missing_modules(extra)
    if missing:
        raise SpecError(
            f"{needed_by} needs servelab's {extra!r} extra ({', '.join(missing)} not installed)",
            install_line(extra),
        )


def extra_checks() -> list[Check]:
    """The extras that no app server's own check reports: ok, or a warning."""
    checks = []
    for extra in EXTRAS:
        missing = missing_modules(extra)
        checks.append(
            Check(f"extra: servelab[{extra}]", "warn", f"not installed ({', '.join(missing)}; "
                  "optional)", install_line(extra))
            if missing
            else Check(f"extra: servelab[{extra}]", "ok", "installed")
        )
    return checks
