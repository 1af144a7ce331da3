"""The example experiment files shipped with servelab (``servelab example NAME``)."""

from __future__ import annotations

from importlib import resources

from servelab.errors import SpecError

_PACKAGE = "servelab.examples"


def example_names() -> list[str]:
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in resources.files(_PACKAGE).iterdir()
        if entry.name.endswith(".toml")
    )


def example_text(name: str) -> str:
    """The file's text; SpecError naming the examples there are for an unknown ``name``."""
    names = example_names()
    if name.removesuffix(".toml") not in names:
        raise SpecError(f"no example named {name!r}", f"choose one of: {', '.join(names)}")
    return (resources.files(_PACKAGE) / f"{name.removesuffix('.toml')}.toml").read_text()
