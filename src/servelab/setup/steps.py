"""The steps of a set-up, each idempotent: Debian's packages, servelab's Python extras, the
tools built into the cache, and mod_wsgi's access to servelab's Python. Each step looks
first and does only what is missing; each returns a StepResult the runner prints.

Without root, a step that needs it does nothing and returns the exact commands to run
with sudo (``commands``); the steps that need no root still run.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from servelab.host.parts import (
    ACTIONLINT_VERSION,
    GO_MINIMUM_MINOR,
    GO_TOOLCHAIN,
    OHA_CRATE,
    OHA_RUST,
    OHA_VERSION,
    SERVICES,
    TOXIPROXY_VERSION,
)
from servelab.host.paths import cache_dir, go_tool_path

POLICY_RC = Path("/usr/sbin/policy-rc.d")
ACL_RECORD_NAME = "www-data-acl.txt"
Say = Callable[[str], None]


@dataclass(frozen=True)
class StepResult:
    name: str
    state: str  # "done" (did something), "present" (nothing to do), "todo" (left to the user)
    detail: str
    seconds: float = 0.0
    commands: tuple[str, ...] = ()  # for "todo": what to run, as it is to be typed


def run_command(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """subprocess.run, checked and in text unless told otherwise."""
    return subprocess.run(argv, **{"check": True, "text": True, **kwargs})  # type: ignore[call-overload]


@dataclass(frozen=True)
class Machine:
    """What the steps ask of the machine: whether it is root, and how a command runs."""

    root: bool = field(default_factory=lambda: os.geteuid() == 0)
    run: Callable[..., subprocess.CompletedProcess[str]] = run_command
    policy_rc: Path = POLICY_RC  # Debian's hook that keeps services from starting


class SetupFailed(Exception):
    """A step's command failed: which (the message), and its output's tail."""

    def __init__(self, problem: str, tail: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.tail = tail


def _run(machine: Machine, argv: Sequence[str], what: str, **kwargs: object) -> None:
    try:
        machine.run(list(argv), capture_output=True, **kwargs)
    except subprocess.CalledProcessError as exc:
        tail = "\n".join(((exc.stderr or "") + (exc.stdout or "")).strip().splitlines()[-15:])
        raise SetupFailed(
            f"{what} failed (exit {exc.returncode}): {' '.join(argv)}", tail
        ) from exc
    except FileNotFoundError as exc:
        raise SetupFailed(f"{what} failed: {exc}", "") from exc


# Debian's packages ----------------------------------------------------------------------


def debian_installed(package: str) -> bool:
    done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package],
                          capture_output=True, text=True, check=False)
    return "install ok installed" in done.stdout


def missing_debian(packages: Sequence[str]) -> list[str]:
    """The packages not installed ("a|b": missing unless one of them is)."""
    if shutil.which("dpkg-query") is None:
        return list(packages)
    return [package for package in dict.fromkeys(packages)
            if not any(debian_installed(choice) for choice in package.split("|"))]


def install_debian(machine: Machine, packages: Sequence[str], say: Say) -> StepResult:
    """apt-get update, then install what is missing, without starting or enabling at boot
    the services the packages bring (Debian's policy-rc.d, exit 101, while installing)."""
    missing = missing_debian(packages)
    if not missing:
        return StepResult("Debian packages", "present", f"{len(set(packages))} installed")
    apt = f"apt-get install -y --no-install-recommends {' '.join(resolve(missing))}"
    if shutil.which("apt-get") is None:
        return StepResult("Debian packages", "todo",
                          f"not a Debian machine: install {', '.join(missing)} with its own "
                          "package manager", commands=(f"# the Debian names: {' '.join(missing)}",))
    if not machine.root:
        return StepResult(
            "Debian packages", "todo",
            f"{', '.join(missing)} need root (Debian starts nginx, apache2 and postgresql on "
            "install; servelab runs its own, so `sudo systemctl disable --now SERVICE` if you "
            "do not want Debian's)",
            commands=("sudo apt-get update", f"sudo DEBIAN_FRONTEND=noninteractive {apt}"),
        )
    services = [SERVICES[package] for package in missing if package in SERVICES]
    own_policy = bool(services) and not machine.policy_rc.exists()
    if own_policy:
        machine.policy_rc.write_text(
            "#!/bin/sh\n# servelab setup: no service starts while it installs packages\nexit 101\n"
        )
        machine.policy_rc.chmod(0o755)
    try:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        _run(machine, ["apt-get", "update", "-qq"], "apt-get update", env=env)
        missing = resolve(missing)
        say(f"installing Debian packages: {' '.join(missing)}")
        _run(machine, ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
             "apt-get install", env=env)
    finally:
        if own_policy:
            machine.policy_rc.unlink(missing_ok=True)
    for service in services:
        if Path("/run/systemd/system").is_dir() and shutil.which("systemctl"):
            machine.run(["systemctl", "disable", "--quiet", service], capture_output=True,
                        check=False)
        elif shutil.which("update-rc.d"):
            machine.run(["update-rc.d", service, "disable"], capture_output=True, check=False)
        say(f"installed {service} without starting it or enabling it at boot (servelab runs "
            f"its own; for Debian's service: systemctl enable --now {service})")
    return StepResult("Debian packages", "done", f"installed {' '.join(missing)}")


# servelab's Python extras ---------------------------------------------------------------


def extra_requirements(extras: Sequence[str]) -> list[Requirement]:
    """The requirements servelab's metadata gives ``extras`` (servelab itself left out)."""
    found: dict[str, Requirement] = {}
    for line in metadata.requires("servelab") or []:
        requirement = Requirement(line)
        if requirement.name == "servelab" or requirement.marker is None:
            continue
        if any(requirement.marker.evaluate({"extra": extra}) for extra in extras):
            requirement.marker = None
            found.setdefault(str(requirement), requirement)
    return list(found.values())


def satisfied(requirement: Requirement) -> bool:
    try:
        version = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        return False
    return requirement.specifier.contains(version, prereleases=True)


def installer() -> list[str] | None:
    """uv (beside servelab's Python or on PATH: a third of pip's time), else pip, for
    servelab's own Python; None when that environment has neither (a bare uv tool venv)."""
    uv = Path(sys.prefix) / "bin" / "uv"
    found = str(uv) if os.access(uv, os.X_OK) else shutil.which("uv")
    if found:
        return [found, "pip", "install", "-q", "--python", sys.executable]
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    return None


def install_extras(machine: Machine, extras: Sequence[str], say: Say, *,
                   blocked: bool = False) -> StepResult:
    """The extras' packages into servelab's own Python (where servelab runs, its app
    servers and charts run). ``blocked``: Debian's packages they build against are not
    there yet."""
    name = f"Python packages ({', '.join(extras)})"
    missing = [str(r) for r in extra_requirements(extras) if not satisfied(r)]
    if not missing:
        return StepResult(name, "present", f"in {sys.prefix}")
    argv = installer()
    command = " ".join(argv or ["uv", "pip", "install", "--python", sys.executable])
    quoted = " ".join(f"'{requirement}'" for requirement in missing)
    if blocked:
        return StepResult(name, "todo", "after Debian's packages: run `servelab setup` again",
                          commands=(f"{command} {quoted}",))
    writable = os.access(sysconfig.get_paths()["purelib"], os.W_OK)
    if argv is None or not writable:
        why = ("servelab's environment has neither uv nor pip" if argv is None
               else f"{sysconfig.get_paths()['purelib']} is not writable")
        sudo = "" if writable or machine.root else "sudo "
        return StepResult(name, "todo", why, commands=(f"{sudo}{command} {quoted}",))
    say(f"installing into servelab's Python: {' '.join(missing)}")
    _run(machine, [*argv, *missing], "installing Python packages")
    return StepResult(name, "done", f"installed {len(missing)} into {sys.prefix}")


# Tools built into the cache -------------------------------------------------------------


def executable(path: Path) -> bool:
    return os.access(path, os.X_OK)


def oha_path() -> Path:
    return cache_dir() / "cargo" / "bin" / OHA_CRATE


def cargo_version(cargo: str) -> tuple[int, int] | None:
    done = subprocess.run([cargo, "--version"], capture_output=True, text=True, check=False)
    words = done.stdout.split()  # "cargo 1.95.0 (f2d3ce0bd 2026-03-21)"
    numbers = words[1].split(".") if len(words) > 1 else []
    if len(numbers) < 2 or not all(n.isdigit() for n in numbers[:2]):
        return None
    return int(numbers[0]), int(numbers[1])


def find_cargo() -> str | None:
    """A cargo new enough to build oha: on PATH or rustup's."""
    home_cargo = str(Path.home() / ".cargo" / "bin" / "cargo")
    for cargo in (shutil.which("cargo"), home_cargo if executable(Path(home_cargo)) else None):
        if cargo and (cargo_version(cargo) or (0, 0)) >= OHA_RUST:
            return cargo
    return None


# Debian's package of a cargo new enough for oha, the first of these that apt can install:
# Debian 12 carries the newer Rust its browsers build with as cargo-web; elsewhere the
# plain cargo. Resolved after `apt-get update` (a fresh root has no package lists).
CARGO_PACKAGES = "cargo-web|cargo"


def installable(package: str) -> bool:
    done = subprocess.run(["apt-cache", "policy", package], capture_output=True, text=True,
                          check=False)
    return "Candidate:" in done.stdout and "Candidate: (none)" not in done.stdout


def resolve(packages: Sequence[str]) -> list[str]:
    """Each "a|b" as the first of them apt can install (the last when it knows none)."""
    chosen = []
    for package in packages:
        *first, last = package.split("|")
        chosen.append(next((c for c in first if installable(c)), last))
    return chosen


def oha_built() -> bool:
    path = oha_path()
    if not os.access(path, os.X_OK):
        return False
    done = subprocess.run([str(path), "--version"], capture_output=True, text=True, check=False)
    return OHA_VERSION in done.stdout


def build_oha(machine: Machine, say: Say) -> StepResult:
    name = f"oha {OHA_VERSION}"
    if oha_built():
        return StepResult(name, "present", str(oha_path()))
    cargo = find_cargo()
    if cargo is None:
        rust = ".".join(map(str, OHA_RUST))
        return StepResult(name, "todo", f"needs cargo {rust} or newer (Debian 12's cargo-web "
                          "package, or rustup)")
    say(f"building oha {OHA_VERSION} with cargo into {cache_dir() / 'cargo'} "
        "(a few minutes, once; the cache keeps it)")
    _run(machine, [cargo, "install", OHA_CRATE, "--locked", "--version", OHA_VERSION,
                   "--root", str(cache_dir() / "cargo"), "--quiet"], "building oha")
    return StepResult(name, "done", str(oha_path()))


def find_go() -> str | None:
    found = shutil.which("go")
    return found or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK)
                     else None)


def go_minor(go: str) -> int | None:
    done = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True,
                          check=False)
    parts = done.stdout.strip().removeprefix("go").split(".")
    return int(parts[1]) if len(parts) > 1 and parts[0] == "1" and parts[1].isdigit() else None


def go_release(say: Say) -> str:
    """Go's release from the Go module proxy (golang.org/toolchain, as GOTOOLCHAIN would
    fetch it, about 70 MB once) into the cache: for a machine whose Go is too old."""
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    dist = cache_dir() / "go" / f"toolchain-{GO_TOOLCHAIN}"
    if not os.access(dist / "bin" / "go", os.X_OK):
        url = ("https://proxy.golang.org/golang.org/toolchain/@v/"
               f"v0.0.1-{GO_TOOLCHAIN}.linux-{arch}.zip")
        say(f"the machine's Go is older than 1.{GO_MINIMUM_MINOR}: fetching {GO_TOOLCHAIN} "
            f"from proxy.golang.org into {dist} (once)")
        import urllib.request

        dist.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dist.parent) as scratch:
            archive = Path(scratch) / "go.zip"
            urllib.request.urlretrieve(url, archive)
            with zipfile.ZipFile(archive) as unpacked:
                unpacked.extractall(scratch)
            [tree] = Path(scratch, "golang.org").glob("toolchain@*")
            for executable in [*tree.joinpath("bin").iterdir(),
                               *tree.joinpath("pkg", "tool").rglob("*")]:
                if executable.is_file():
                    executable.chmod(0o755)  # a zip keeps no modes
            tree.rename(dist)
    return str(dist / "bin" / "go")


def usable_go(say: Say) -> str | None:
    go = find_go()
    if go is None:
        return None
    minor = go_minor(go)
    return go if minor is not None and minor >= GO_MINIMUM_MINOR else go_release(say)


@dataclass(frozen=True)
class GoTool:
    """A tool built with go into the cache."""

    name: str
    binary: str  # its file name in the cache (version or source hash in it)
    about: str
    module: str | None = None  # `go install MODULE` (else: the replay sender's source)


def go_tools() -> dict[str, GoTool]:
    from servelab.load.vegeta import source_digest

    return {
        "toxiproxy": GoTool("toxiproxy", f"toxiproxy-server-v{TOXIPROXY_VERSION}",
                            "about 20 s, once",
                            f"github.com/Shopify/toxiproxy/v2/cmd/server@v{TOXIPROXY_VERSION}"),
        "replay-sender": GoTool("the replay sender", f"servelab-replay-sender-{source_digest()}",
                                "about a minute, once"),
        "actionlint": GoTool("actionlint", f"actionlint-v{ACTIONLINT_VERSION}", "about 30 s, once",
                             f"github.com/rhysd/actionlint/cmd/actionlint@v{ACTIONLINT_VERSION}"),
    }


def build_go_tool(machine: Machine, tool: GoTool, say: Say) -> StepResult:
    target = go_tool_path(tool.binary)
    if executable(target):
        return StepResult(tool.name, "present", str(target))
    go = usable_go(say)
    if go is None:
        return StepResult(tool.name, "todo", "needs go (Debian's golang-go package)")
    say(f"building {tool.name} with go into {target.parent} ({tool.about})")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        if tool.module is None:
            from servelab.load.vegeta import SOURCE_DIR

            _run(machine, [go, "build", "-trimpath", "-o", f"{scratch}/tool", "."],
                 f"building {tool.name}", cwd=SOURCE_DIR)
            built = Path(scratch, "tool")
        else:
            _run(machine, [go, "install", tool.module], f"building {tool.name}",
                 env={**os.environ, "GOBIN": scratch})
            [built] = Path(scratch).iterdir()
        built.rename(target)
    return StepResult(tool.name, "done", str(target))


# mod_wsgi's daemons (www-data) and servelab's Python ------------------------------------


def acl_record() -> Path:
    return cache_dir() / ACL_RECORD_NAME


def acl_targets() -> list[Path]:
    """What mod_wsgi's daemons read when servelab runs them as root: the standard library,
    servelab's site-packages and servelab's own package (a checkout's src)."""
    import servelab

    return [Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"]),
            Path(servelab.__file__).resolve().parent.parent]


def grant_www_data(machine: Machine, say: Say) -> StepResult:
    """Traverse (x, no listing) for www-data on each directory on the way to acl_targets
    that is closed to it, and nothing else; each grant is recorded for --undo-acl."""
    name = "www-data may traverse to servelab's Python"
    if not machine.root or shutil.which("setfacl") is None:
        return StepResult(name, "present", "not root: mod_wsgi's daemons run as you")
    granted: list[str] = []
    record = acl_record()
    known = set(record.read_text().splitlines()) if record.exists() else set()
    for target in acl_targets():
        directory = Path("/")
        for part in target.parts[1:]:
            directory /= part
            closed = machine.run(
                ["setpriv", "--reuid=www-data", "--regid=www-data", "--clear-groups",
                 "test", "-x", str(directory)], capture_output=True, check=False,
            ).returncode != 0
            if closed:
                _run(machine, ["setfacl", "-m", "u:www-data:x", str(directory)], "setfacl")
                granted.append(str(directory))
    if not granted:
        return StepResult(name, "present", "already")
    record.parent.mkdir(parents=True, exist_ok=True)
    with record.open("a") as lines:
        lines.writelines(f"{directory}\n" for directory in granted if directory not in known)
    return StepResult(name, "done", f"granted on {', '.join(granted)} "
                      "(undo: servelab setup --undo-acl)")


def undo_www_data(machine: Machine, say: Say) -> StepResult:
    """Remove exactly the ACL entries the set-up added, as recorded."""
    name = "www-data's access taken back"
    record = acl_record()
    if not record.exists() or not record.read_text().strip():
        return StepResult(name, "present", f"nothing to take back ({record} is empty)")
    for directory in record.read_text().splitlines():
        if directory and Path(directory).exists():
            _run(machine, ["setfacl", "-x", "u:www-data", directory], "setfacl -x")
            say(f"www-data may no longer traverse {directory}")
    record.unlink()
    return StepResult(name, "done", "every recorded grant removed")
