"""What each part of a set-up brings: Debian's packages, servelab's Python extras and the
tools built into servelab's cache. One table (PARTS); everything that says how to get a
missing piece (doctor's fixes, errors) names the part here, so there is one route.

The core is what `servelab study quick` needs; the other parts are asked for with
``servelab setup --with PART[,PART]`` (``--all``: every one).
"""

from __future__ import annotations

from dataclasses import dataclass

# The versions the cache's builds are pinned at (a changed pin builds anew).
OHA_CRATE = "oha"  # the load generator the core builds with cargo
OHA_VERSION = "1.16.0"
OHA_RUST = (1, 88)  # its rust-version: Debian 12's cargo (1.65) is too old, cargo-web is not
TOXIPROXY_VERSION = "2.12.0"
ACTIONLINT_VERSION = "1.7.12"
# Go's release taken from the Go module proxy where the machine's Go is older than the
# replay sender's go.mod allows (Debian 12's golang-go is 1.19, which knows no toolchain
# downloads).
GO_TOOLCHAIN = "go1.22.12"
GO_MINIMUM_MINOR = 22


@dataclass(frozen=True)
class Part:
    name: str
    summary: str
    debian: tuple[str, ...] = ()
    # pyproject's optional dependencies, installed into servelab's own Python
    extras: tuple[str, ...] = ()
    # tools built into the cache: "oha", "toxiproxy", "replay-sender", "actionlint"
    builds: tuple[str, ...] = ()
    # Its extras compile against its Debian packages (mod_wsgi against apache2-dev).
    extras_need_debian: bool = False


CORE = Part(
    "core",
    "nginx, ab, wrk, valgrind (instruction counts), taskset, ss/ip; the report's charts; "
    "oha, built with cargo (minutes, once)",
    # valgrind: check and bisect count the app's instructions per request.
    debian=("nginx-light", "apache2-utils", "wrk", "util-linux", "iproute2", "procps",
            "ca-certificates", "valgrind"),
    extras=("charts",),
    builds=(OHA_CRATE,),
)

PARTS: dict[str, Part] = {part.name: part for part in (
    Part("servers", "granian, hypercorn and uWSGI (prebuilt wheels)",
         extras=("servers", "uwsgi")),
    Part("apache", "Apache httpd as a front, and mod_wsgi (built by pip: gcc, apache2-dev); as "
         "root, www-data may traverse to servelab's Python (`servelab setup --undo-acl`)",
         debian=("apache2", "apache2-dev", "gcc", "libc6-dev", "python3-dev", "acl"),
         extras=("apache",), extras_need_debian=True),
    Part("postgres", "PostgreSQL (servelab runs its own instances) and the Django reference app",
         debian=("postgresql",), extras=("django",)),
    Part("toxiproxy", "a slow link in front of PostgreSQL (--db-latency), built with go",
         builds=("toxiproxy",)),
    Part("replay", "the sender that replays access logs (Go's standard library), built with go",
         builds=("replay-sender",)),
    Part("chromium", "opens the HTML report headless (screenshot, browser test)",
         debian=("chromium",)),
    Part("test", "what servelab's own test suite needs: git, pytest & co., mkdocs, Locust, "
         "py-spy, actionlint",
         debian=("git",), extras=("test", "docs", "locust", "profile"), builds=("actionlint",)),
)}

# Services Debian starts when their package is installed: servelab installs them without
# starting them or enabling them at boot (it runs its own instances on its own ports).
SERVICES = {"nginx-light": "nginx", "apache2": "apache2", "postgresql": "postgresql"}


def parse_parts(text: str) -> tuple[str, ...]:
    """'apache, replay' -> ('apache', 'replay'); ValueError naming an unknown part."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in PARTS]
    if unknown:
        raise ValueError(
            f"unknown part {unknown[0]!r} (choose from {', '.join(PARTS)}, or --all)"
        )
    return names


def chosen(names: tuple[str, ...]) -> tuple[Part, ...]:
    """The core and the named parts, in the table's order, each once."""
    return (CORE, *(part for name, part in PARTS.items() if name in names))


def setup_command(part: str | None = None) -> str:
    """The command that installs ``part`` (None: the core), for doctor's and errors' fixes."""
    return "servelab setup" if part in (None, "core") else f"servelab setup --with {part}"


def part_with_extra(extra: str) -> str:
    """The part whose set-up installs servelab's ``extra``."""
    for part in (CORE, *PARTS.values()):
        if extra in part.extras:
            return part.name
    raise KeyError(extra)
