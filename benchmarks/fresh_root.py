"""Issue "servelab in the user's own project": servelab installed as a tool on a fresh
Debian and set up by `servelab setup`, each step timed. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/fresh_root.py [--suite bookworm] [--keep DIR] [--budget 60s]

A benchmark, not a test: a fresh root and the oha build take 10+ minutes of both CPUs.
As root, on a Debian machine with mmdebstrap (`apt-get install mmdebstrap`):

1. mmdebstrap makes a minimal Debian root (minbase, plus python3, pipx and git, as a CI
   image has them) in a temp dir;
2. the wheel is built from this checkout's last commit (its size printed);
3. in the root: `pipx install servelab-*.whl`, as a user installs the tool;
4. `servelab setup` (the core, from bare: Debian's packages, the charts, oha built with
   cargo), then `servelab setup --with replay` (go, the replay sender), then both again
   with the cache warm;
5. `servelab doctor`, and `servelab check` on a small WSGI app: a git repository whose
   head is checked against its base (an A/A check, --budget given).

Each command runs chrooted in a mount and PID namespace of its own (proc, sys and dev
mounted there, gone with it): nothing it starts outlives it, and the host's mounts are
untouched. The root is deleted after (--keep DIR: made there and kept).
"""

from __future__ import annotations

import argparse
import fcntl
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
LOCK = "/tmp/servelab-cpu.lock"
MIRRORS = (
    "deb http://deb.debian.org/debian {suite} main",
    "deb http://deb.debian.org/debian {suite}-updates main",
    "deb http://deb.debian.org/debian-security {suite}-security main",
)
APP = '''
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"shop"]
'''
# Inside the root: the user's PATH with pipx's bin dir; pip told to trust the system's
# certificates (with the machine's own CAs added below).
ENV = ("HOME=/root LANG=C.UTF-8 PIP_CERT=/etc/ssl/certs/ca-certificates.crt "
       "PATH=/root/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
# The machine's own certificate authorities (a network whose egress proxy signs with its
# own CA, as many CI networks do) and pip's configuration, carried into the root as that
# network's CI image would carry them.
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
PIP_CONF = Path("/etc/pip.conf")


def timed(label: str, argv: list[str], **kwargs: object) -> tuple[float, str, int]:
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    seconds = time.monotonic() - started
    print(f"{label:<44} {seconds:7.1f} s  exit {done.returncode}", flush=True)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        print("\n".join("    " + line for line in output.strip().splitlines()[-25:]))
    return seconds, output, done.returncode


def in_root(root: Path, command: str) -> list[str]:
    """``command`` (a shell line) chrooted into ``root`` in namespaces of its own."""
    script = (
        f"mount -t proc proc {root}/proc && mount --rbind /sys {root}/sys && "
        f"mount --rbind /dev {root}/dev && exec chroot {root} /usr/bin/env -i {ENV} "
        f"/bin/sh -c {shlex.quote(command)}"
    )
    return ["unshare", "--mount", "--pid", "--fork", "--propagation", "private",
            "sh", "-c", script]


def setup_lines(output: str) -> None:
    for line in output.splitlines():
        if line.startswith("setup: ") and "(" in line:
            print("    " + line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="bookworm")
    parser.add_argument("--keep", type=Path, help="make the root here and keep it")
    parser.add_argument("--budget", default="60s", help="the check's --budget")
    args = parser.parse_args()
    if shutil.which("mmdebstrap") is None:
        sys.exit("fresh_root: mmdebstrap is not installed (fix: apt-get install mmdebstrap)")
    # SIGTERM unwinds as Ctrl-C does: the root is removed either way.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))

    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with tempfile.TemporaryDirectory(prefix="servelab-fresh-root-") as scratch:
            root = args.keep or Path(scratch) / "root"
            run(root, Path(scratch), args)


def run(root: Path, scratch: Path, args: argparse.Namespace) -> None:
    print(f"fresh root {root} ({args.suite}), {time.strftime('%Y-%m-%d %H:%M')}")
    mirrors = [m.format(suite=args.suite) for m in MIRRORS]
    _, _, code = timed("mmdebstrap (minbase + python3, pipx, git)", [
        "mmdebstrap", "--variant=minbase", "--include=python3,pipx,git,ca-certificates",
        args.suite, str(root), *mirrors])
    if code:
        return
    shutil.copy("/etc/resolv.conf", root / "etc" / "resolv.conf")
    if LOCAL_CAS.is_dir():
        shutil.copytree(LOCAL_CAS, root / LOCAL_CAS.relative_to("/"), dirs_exist_ok=True)
        timed("update-ca-certificates (the machine's CAs)",
              in_root(root, "update-ca-certificates"))
    if PIP_CONF.is_file():
        shutil.copy(PIP_CONF, root / "etc" / "pip.conf")
    source = scratch / "source"  # the last commit, as a clone has it
    source.mkdir()
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=CHECKOUT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    timed("build the wheel", [sys.executable, "-m", "build", "--wheel", "--outdir",
                              str(root / "tmp"), str(source)])
    [wheel] = (root / "tmp").glob("servelab-*.whl")
    print(f"    {wheel.name}: {wheel.stat().st_size / 1024:.0f} kB")
    _, _, code = timed("pipx install servelab (the wheel)",
                       in_root(root, f"pipx install /tmp/{wheel.name}"))
    if code:
        return
    for label, command in (
        ("servelab setup (bare: the core)", "servelab setup"),
        ("servelab setup --with replay (go, sender)", "servelab setup --with replay"),
        ("servelab setup (warm)", "servelab setup"),
        ("servelab setup --with replay (warm)", "servelab setup --with replay"),
    ):
        _, output, _ = timed(label, in_root(root, command))
        setup_lines(output)
    _, output, _ = timed("servelab doctor", in_root(root, "servelab doctor"))
    app = root / "root" / "shop"
    (app / "shop").mkdir(parents=True)
    (app / "shop" / "__init__.py").write_text("")
    (app / "shop" / "wsgi.py").write_text(APP)
    git = "git -c user.name=servelab -c user.email=servelab@localhost"
    _, output, _ = timed(
        f"servelab check (A/A, --budget {args.budget})",
        in_root(root, f"cd /root/shop && git init -q -b main && {git} add . && "
                f"{git} commit -qm base && {git} tag base && "
                f"echo '# nothing slower' >> shop/wsgi.py && {git} commit -qam head && "
                f"servelab check --app shop.wsgi:app --app-dir . --baseline-ref base "
                f"--budget {args.budget} --inconclusive pass"),
    )
    print("\n".join("    " + line for line in output.strip().splitlines()[-20:]))


if __name__ == "__main__":
    main()
