"""Where an exported stack lives on the target machine: its paths, users, units and
listen address (``DeployLayout``, all derived from the deployment's name), the measured
app's own directory and virtualenv it keeps (``app_places``), and the checks of the name
and listen address the user gives. ``servelab.export.deploy`` renders the files into it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from servelab.apps import BUILTIN_APPS
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.registry import DEFAULT_FRONT

DEFAULT_NAME = "webapp"
DEFAULT_LISTEN = "80"
FRONT_USER = "www-data"  # Debian's nginx and Apache workers' user
_NAME = re.compile(r"[a-z][a-z0-9-]{0,30}")


@dataclass(frozen=True)
class DeployLayout:
    """Where the exported stack lives on the target machine, all derived from ``name``."""

    name: str
    listen: str = DEFAULT_LISTEN
    # The measured app's own directory and virtualenv (``app_places``): the exported
    # files name them as they are; None: /opt/NAME/app and /opt/NAME/venv.
    own_app_dir: Path | None = None
    own_venv: Path | None = None
    front: str = DEFAULT_FRONT  # the front's kind (the measured stack's)

    @property
    def app_user(self) -> str:
        return self.name

    @property
    def socket_group(self) -> str:
        return f"{self.name}-sock"

    @property
    def front_user(self) -> str:
        return FRONT_USER

    @property
    def conf_dir(self) -> Path:
        return Path("/etc") / self.name

    @property
    def app_run_dir(self) -> Path:
        """The app unit's RuntimeDirectory: the socket lives here."""
        return Path("/run") / self.name

    @property
    def socket(self) -> Path:
        return self.app_run_dir / "app.sock"

    @property
    def front_run_dir(self) -> Path:
        return Path("/run") / f"{self.name}-{self.front}"

    @property
    def front_state_dir(self) -> Path:
        return Path("/var/lib") / f"{self.name}-{self.front}"

    @property
    def app_dir(self) -> Path:
        return self.own_app_dir or Path("/opt") / self.name / "app"

    @property
    def venv(self) -> Path:
        return self.own_venv or Path("/opt") / self.name / "venv"

    @property
    def app_unit(self) -> str:
        return f"{self.name}-app.service"

    @property
    def front_unit(self) -> str:
        return f"{self.name}-{self.front}.service"

    @property
    def sysctl_file(self) -> str:
        return f"99-{self.name}.conf"

    def machine_paths(self) -> dict[str, Path]:
        """Every absolute path of the target machine the files name (for moving them)."""
        paths = {
            "conf": self.conf_dir,
            "run-app": self.app_run_dir,
            "run-front": self.front_run_dir,
            "state-front": self.front_state_dir,
        }
        # The app's own places exist here already: they are not moved.
        if self.own_app_dir is None:
            paths["app"] = self.app_dir
        if self.own_venv is None:
            paths["venv"] = self.venv
        return paths


class AppPlaces(TypedDict, total=False):
    """DeployLayout's fields that name the measured app's own places."""

    own_app_dir: Path
    own_venv: Path


def app_places(stack: StackSpec) -> AppPlaces:
    """The user's app's own directory and virtualenv, as measured (DeployLayout's
    ``own_app_dir``, ``own_venv``); none for a built-in app."""
    places: AppPlaces = {}
    if stack.app.ref.strip() in BUILTIN_APPS:
        return places
    if stack.app.app_dir is not None:
        places["own_app_dir"] = stack.app.app_dir.expanduser().resolve()
    python = stack.app.python
    if python is not None and python.parent.name == "bin" and (
        python.parent.parent / "pyvenv.cfg"
    ).is_file():
        places["own_venv"] = python.parent.parent
    return places


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise SpecError(
            f"deployment name {name!r} is not usable as a user, group and unit name",
            "use lowercase letters, digits and '-', starting with a letter (at most 31)",
        )
    return name


def check_listen(listen: str) -> str:
    """``listen`` as the front's listen directive takes it (nginx's ``listen``, Apache's
    ``Listen``): a port, or an address and a port (``0.0.0.0:8080``, ``*:80``,
    ``[::]:8080``); SpecError otherwise. The export's check runs the front on a free
    loopback port, so the address the user gave is checked here."""
    address, colon, port = listen.rpartition(":")
    if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535 or (
        colon and not address
    ):
        raise SpecError(
            f"--listen {listen!r} has no port between 1 and 65535",
            "give a port (80), or an address and a port (0.0.0.0:8080, [::]:8080)",
        )
    if address and address != "*":
        host = address[1:-1] if address.startswith("[") and address.endswith("]") else address
        try:
            parsed = ipaddress.ip_address(host)
        except ValueError:
            parsed = None
        if parsed is None or (parsed.version == 6) != address.startswith("["):
            raise SpecError(
                f"--listen {listen!r}: {address!r} is not an IP address to listen on",
                "give an IPv4 address (0.0.0.0:8080), an IPv6 one in brackets ([::]:8080), "
                "or '*:8080'",
            )
    return listen
