"""Load drivers: one module per tool behind the ``LoadDriver`` protocol."""

from __future__ import annotations

from servelab.errors import SpecError
from servelab.load.base import LoadDriver


def get_driver(name: str) -> LoadDriver:
    from servelab.load.ab import AbDriver
    from servelab.load.oha import OhaDriver
    from servelab.load.wrk import WrkDriver

    drivers: dict[str, type[LoadDriver]] = {"oha": OhaDriver, "ab": AbDriver, "wrk": WrkDriver}
    try:
        return drivers[name]()
    except KeyError:
        raise SpecError(
            f"unknown load driver {name!r}", f"choose one of {', '.join(sorted(drivers))}"
        ) from None


DRIVER_NAMES = ("oha", "ab", "wrk")
