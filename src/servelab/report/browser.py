"""Open a report in a real browser: headless Chromium, for a screenshot or the rendered DOM.

Chromium runs in its own session (process group) with a fresh, private
profile directory and every background-networking feature off (it fetches
nothing; this also keeps it quiet on machines without a network). When it
exits, or times out, the whole group is killed and reaped and the profile
removed, so no renderer or zygote process outlives the call.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from servelab.errors import MissingToolError, ServelabError
from servelab.host.paths import find_program
from servelab.host.procs import group_members

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # servelab may run as root (containers, CI), where the sandbox refuses
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
)
TIMEOUT_S = 90.0


def chromium_binary() -> str:
    for name in CHROMIUM_NAMES:
        found = find_program(name)
        if found:
            return found
    raise MissingToolError(
        "Chromium is not installed (needed to open the HTML report in a browser)",
        "servelab setup --with chromium (or apt-get install chromium)",
    )


def _run(html: Path, args: list[str], timeout_s: float) -> tuple[int, str, str]:
    """Run headless Chromium on ``html``; (exit code, stdout, stderr). Always cleans up."""
    profile = Path(tempfile.mkdtemp(prefix="servelab-chromium-"))
    argv = [
        chromium_binary(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args,
        html.resolve().as_uri(),
    ]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "HOME": str(profile)},
    )
    try:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            out, err = proc.communicate()
            raise ServelabError(
                f"Chromium did not finish rendering {html} within {timeout_s:g} s",
                "check that the HTML file opens in a browser",
                detail=err.decode(errors="replace")[-2000:],
            ) from None
        return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    finally:
        _kill_group(proc.pid)
        if proc.poll() is None:
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


def _kill_group(pgid: int, timeout_s: float = 5.0) -> None:
    """SIGKILL what is left of Chromium's process group and wait until it is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)


def screenshot(
    html: Path, png: Path, *, width: int = 1280, height: int = 2000, timeout_s: float = TIMEOUT_S
) -> Path:
    """Render ``html`` in headless Chromium and save the window as ``png``."""
    png = png.resolve()
    png.unlink(missing_ok=True)
    code, _, err = _run(
        html, [f"--screenshot={png}", f"--window-size={width},{height}"], timeout_s
    )
    if not png.is_file() or png.stat().st_size == 0:
        raise ServelabError(
            f"Chromium wrote no screenshot of {html} (exit code {code})",
            "see Chromium's messages below",
            detail=err[-2000:],
        )
    return png


def rendered_dom(html: Path, *, timeout_s: float = TIMEOUT_S) -> str:
    """The page's DOM as Chromium serialises it after loading ``html``."""
    code, out, err = _run(html, ["--dump-dom"], timeout_s)
    if code != 0 or "<html" not in out:
        raise ServelabError(
            f"Chromium could not render {html} (exit code {code})",
            "see Chromium's messages below",
            detail=err[-2000:],
        )
    return out
