"""A real X server for a test: Xvfb on a free display with the openbox window manager, for tests that press
real keys with xdotool (`tests/helpers/realx_probe.py`).

Offscreen Qt and QTest key clicks skip the X keymap and the window manager, so they could not see Shift+Tab
refused as an "Ambiguous shortcut overload" or the wheel changing a Settings value: these tests can.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TOOLS = ("Xvfb", "openbox", "xdotool")
# Set by .ci/run: there a missing tool is a failure, not a skip.
REQUIRED = os.environ.get("LETTERPRESS_REAL_X", "") == "required"


def missing_tools() -> list[str]:
    """The programs of the real-X lane this machine lacks."""
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def skip_reason() -> str:
    """Why the real-X lane cannot run here ("" when it can)."""
    missing = missing_tools()
    if not missing:
        return ""
    return (
        f"the real-X lane needs {', '.join(missing)} (Debian: apt-get install --no-install-recommends "
        "xvfb openbox xdotool); .ci/run installs them and runs it"
    )


def _read_display(fd: int, seconds: float) -> str:
    """The display number Xvfb writes to -displayfd once it accepts clients."""
    text = b""
    while not text.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], seconds)
        if not ready:
            raise RuntimeError(f"Xvfb did not start within {seconds:.0f} s")
        chunk = os.read(fd, 64)
        if not chunk:
            raise RuntimeError("Xvfb exited before it took a display")
        text += chunk
    return text.decode().strip()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextmanager
def x_session(scratch: Path, size: str = "1600x1000x24") -> Iterator[dict[str, str]]:
    """Xvfb on a free display plus openbox, ready to manage windows; yields the environment to run a Qt
    program in (DISPLAY set, the xcb platform)."""
    read_fd, write_fd = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", size, "-nolisten", "tcp"],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    wm: subprocess.Popen[bytes] | None = None
    try:
        display = _read_display(read_fd, 30)
        env = {**os.environ, "DISPLAY": f":{display}", "QT_QPA_PLATFORM": "xcb"}
        ready = scratch / "openbox-ready"
        wm = subprocess.Popen(
            ["openbox", "--startup", f"touch {ready}"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # openbox runs its --startup command once it manages the screen; no fixed sleep.
        subprocess.run(
            ["sh", "-c", f"i=0; while [ ! -e '{ready}' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"],
            check=True,
            timeout=60,
        )
        if not ready.exists():
            raise RuntimeError("openbox did not start within 30 s")
        yield env
    finally:
        os.close(read_fd)
        if wm is not None:
            _stop(wm)
        _stop(xvfb)


__all__ = ["REQUIRED", "TOOLS", "missing_tools", "skip_reason", "x_session"]
