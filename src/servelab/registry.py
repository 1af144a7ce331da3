"""A registry of plug-ins by name: "module:Class" strings imported when first used, as
uvicorn's ``HTTP_PROTOCOLS`` and ``LOOP_SETUPS``. servers/, fronts/ and load/ each keep
one; adding a plug-in is one module and one line in its registry."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import Any, Generic, TypeVar

from servelab.errors import SpecError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, what: str, entries: dict[str, str]) -> None:
        self.what = what  # names the plug-in in messages: "load driver"
        self.entries = dict(entries)

    @property
    def names(self) -> tuple[str, ...]:
        """In registration order; the first is the default."""
        return tuple(self.entries)

    def cls(self, name: str) -> type[T]:
        """The class registered as ``name``; SpecError naming the choices if none is."""
        if name not in self.entries:
            raise SpecError(
                f"unknown {self.what} {name!r}", f"choose one of {', '.join(self.names)}"
            )
        return imported(self.entries[name])

    def get(self, name: str) -> T:
        """The one shared instance of ``name`` (plug-ins without state)."""
        return _instance(self.entries[name]) if name in self.entries else self.cls(name)()

    def where(self, test: Callable[[T], object]) -> tuple[str, ...]:
        """The names whose shared instance passes ``test``, in registration order."""
        return tuple(name for name in self.names if test(self.get(name)))


@cache
def imported(target: str) -> Any:
    """What "module:name" names, its module imported on first use."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@cache
def _instance(target: str) -> Any:
    return imported(target)()
