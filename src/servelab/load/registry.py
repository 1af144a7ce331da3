"""Every load driver servelab can run; adding a driver is one module and one line here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab.registry import Registry

if TYPE_CHECKING:
    from servelab.load.base import LoadDriver

DRIVERS: Registry[LoadDriver] = Registry(
    "load driver",
    {
        "oha": "servelab.load.oha:OhaDriver",
        "ab": "servelab.load.ab:AbDriver",
        "wrk": "servelab.load.wrk:WrkDriver",
    },
)
DRIVER_NAMES = DRIVERS.names
DEFAULT_DRIVER = DRIVER_NAMES[0]


def get_driver(name: str) -> LoadDriver:
    """A new driver of ``name`` (drivers keep state); SpecError naming the choices for an
    unknown one."""
    return DRIVERS.cls(name)()


def capabilities(name: str) -> frozenset[str]:
    """What driver ``name`` can do (see ``servelab.load.base.CAPABILITIES``)."""
    return DRIVERS.cls(name).capabilities


def most_capable() -> str:
    return max(DRIVER_NAMES, key=lambda name: len(capabilities(name)))
