"""Every load driver servelab can run: name -> "module:Class", imported when first used.
Adding a driver is one module and one line here."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from servelab.errors import SpecError

if TYPE_CHECKING:
    from servelab.load.base import LoadDriver

DRIVERS: dict[str, str] = {
    "oha": "servelab.load.oha:OhaDriver",
    "ab": "servelab.load.ab:AbDriver",
    "wrk": "servelab.load.wrk:WrkDriver",
}
DRIVER_NAMES = tuple(DRIVERS)
DEFAULT_DRIVER = DRIVER_NAMES[0]


def driver_class(name: str) -> type[LoadDriver]:
    try:
        module, _, attr = DRIVERS[name].partition(":")
    except KeyError:
        raise SpecError(
            f"unknown load driver {name!r}", f"choose one of {', '.join(sorted(DRIVERS))}"
        ) from None
    return getattr(importlib.import_module(module), attr)


def get_driver(name: str) -> LoadDriver:
    """A new driver of ``name``; SpecError naming the choices for an unknown one."""
    return driver_class(name)()


def capabilities(name: str) -> frozenset[str]:
    """What driver ``name`` can do (see ``servelab.load.base.CAPABILITIES``)."""
    return driver_class(name).capabilities


def most_capable() -> str:
    return max(DRIVER_NAMES, key=lambda name: len(capabilities(name)))
