"""Every load driver servelab can run; adding a driver is one module and one line here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from servelab.registry import Registry

if TYPE_CHECKING:
    from servelab.load.base import LoadDriver

DRIVERS: Registry[LoadDriver] = Registry(
    "load driver",
    {
        "oha": "servelab.load.oha:OhaDriver",
        "ab": "servelab.load.ab:AbDriver",
        "wrk": "servelab.load.wrk:WrkDriver",
        "locust": "servelab.load.locust:LocustDriver",
    },
)
DRIVER_NAMES = DRIVERS.names
DEFAULT_DRIVER = DRIVER_NAMES[0]


def get_driver(name: str, options: Mapping[str, Any] | None = None) -> LoadDriver:
    """A new driver of ``name`` (drivers keep state) with its own ``options`` (an
    experiment's ``driver_options``, checked there); SpecError naming the choices for an
    unknown one."""
    cls = DRIVERS.cls(name)
    return cls.with_options(options) if options else cls()


def capabilities(name: str) -> frozenset[str]:
    """What driver ``name`` can do (see ``servelab.load.base.CAPABILITIES``)."""
    return DRIVERS.cls(name).capabilities


def most_capable() -> str:
    return max(DRIVER_NAMES, key=lambda name: len(capabilities(name)))
