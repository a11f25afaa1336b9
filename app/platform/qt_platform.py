"""Can Qt open a window here? Checked before `QApplication` exists, because Qt answers a missing library by
aborting.

When the platform plugin (xcb on a Linux desktop, or whatever `QT_QPA_PLATFORM` names) cannot load, Qt prints
a misleading hint (it names libxcb-cursor0 even when that is installed) and the process dies with SIGABRT
(exit 134). This module reads the plugin's own dependencies with `ldd` (they are the truth, not a list we
guessed), names the missing shared libraries, maps them to the Debian/Ubuntu and Fedora packages that ship
them, and returns a message with the install commands; `python -m app` prints it and exits with
`EXIT_QT_PLATFORM`. Never imports QtGui or QtWidgets (loading them is what must not happen yet).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

EXIT_QT_PLATFORM = 4  # Qt cannot open a window here: libraries missing or no display

# soname -> (Debian/Ubuntu package, Fedora package). The libraries Qt 6's xcb, wayland and eglfs plugins and
# QtGui itself link against; anything else falls back to the Debian naming rule and a path install for dnf.
PACKAGES: dict[str, tuple[str, str]] = {
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util"),
    "libxcb-ewmh.so.2": ("libxcb-ewmh2", "xcb-util-wm"),
    "libxcb.so.1": ("libxcb1", "libxcb"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libX11.so.6": ("libx11-6", "libX11"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb"),
    "libXau.so.6": ("libxau6", "libXau"),
    "libXdmcp.so.6": ("libxdmcp6", "libXdmcp"),
    "libSM.so.6": ("libsm6", "libSM"),
    "libICE.so.6": ("libice6", "libICE"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl"),
    "libGL.so.1": ("libgl1", "libglvnd-glx"),
    "libGLX.so.0": ("libglx0", "libglvnd-glx"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libgthread-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libwayland-client.so.0": ("libwayland-client0", "libwayland-client"),
    "libwayland-cursor.so.0": ("libwayland-cursor0", "libwayland-cursor"),
    "libwayland-egl.so.1": ("libwayland-egl1", "libwayland-egl"),
    "libdrm.so.2": ("libdrm2", "libdrm"),
    "libgbm.so.1": ("libgbm1", "mesa-libgbm"),
    "libmtdev.so.1": ("libmtdev1", "mtdev"),
    "libinput.so.10": ("libinput10", "libinput"),
    "libudev.so.1": ("libudev1", "systemd-libs"),
}
# The xcb core extensions (libxcb-randr.so.0, libxcb-shm.so.0, ...) are all in Fedora's libxcb.
_XCB_EXTENSION = re.compile(r"^libxcb-([a-z0-9]+)\.so\.(\d+)$")
_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found", re.MULTILINE)


@dataclass(frozen=True)
class PlatformProblem:
    """Why Qt cannot open a window, and what to do about it."""

    platform: str
    plugin: Path | None
    missing: tuple[str, ...] = ()
    debian: tuple[str, ...] = field(default=())
    fedora: tuple[str, ...] = field(default=())
    reason: str = ""

    def message(self) -> str:
        if not self.missing:
            return self.reason
        lines = [
            f'Letterpress cannot open a window: Qt\'s "{self.platform}" '
            f"platform plugin ({self.plugin}) needs system "
            f"libraries that are not installed: {', '.join(self.missing)}.",
            "Install them, then start Letterpress again:",
            f"  Debian/Ubuntu:  sudo apt install {' '.join(self.debian)}",
            f"  Fedora:         sudo dnf install {' '.join(self.fedora)}",
            "(Qt's own hint about libxcb-cursor0 can be misleading; "
            "the list above is read from the plugin with ldd.)",
        ]
        return "\n".join(lines)


def packages_for(soname: str) -> tuple[str, str]:
    """(Debian/Ubuntu package, Fedora package) that ship the shared library `soname`."""
    if soname in PACKAGES:
        return PACKAGES[soname]
    match = _XCB_EXTENSION.match(soname)
    if match:
        return f"libxcb-{match.group(1)}{match.group(2)}", "libxcb"
    return _debian_name(soname), f"'*/{soname}'"  # dnf resolves a file glob to the package that provides it


def _debian_name(soname: str) -> str:
    """Debian's library-package rule: libfoo.so.N -> libfooN, libfoo2.so.N -> libfoo2-N (lower case)."""
    match = re.match(r"^(lib[^/]+?)\.so\.(\d+)", soname)
    if not match:
        return soname
    base, major = match.group(1).lower(), match.group(2)
    return f"{base}-{major}" if base[-1].isdigit() else f"{base}{major}"


def current_platform(environ: Mapping[str, str] | None = None) -> str:
    """The platform plugin Qt will pick: `QT_QPA_PLATFORM` (first choice, without options), else the
    desktop's."""
    env = os.environ if environ is None else environ
    requested = env.get("QT_QPA_PLATFORM", "").strip()
    if requested:
        return requested.split(";")[0].split(":")[0].strip()
    if env.get("XDG_SESSION_TYPE") == "wayland" and env.get("WAYLAND_DISPLAY"):
        return "wayland"
    return "xcb"


def plugin_path(platform: str) -> Path | None:
    """The plugin file of `platform` inside the installed PySide6 (or a frozen bundle), if there is one."""
    import importlib.util

    roots: list[Path] = []
    spec = importlib.util.find_spec("PySide6")
    if spec is not None and spec.origin:
        roots.append(Path(spec.origin).parent / "Qt" / "plugins")
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        roots += [Path(frozen) / "PySide6" / "Qt" / "plugins", Path(frozen) / "PySide6" / "plugins"]
    for root in roots:
        candidate = root / "platforms" / f"libq{platform}.so"
        if candidate.is_file():
            return candidate
    return None


def missing_libraries(library: Path, *, ldd_output: str | None = None) -> tuple[str, ...]:
    """The shared libraries `library` (or anything it pulls in) needs and the dynamic loader cannot find."""
    if ldd_output is None:
        ldd = shutil.which("ldd")
        if ldd is None:
            return ()
        try:
            out = subprocess.run([ldd, str(library)], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return ()
        ldd_output = out.stdout + out.stderr
    return tuple(dict.fromkeys(_NOT_FOUND.findall(ldd_output)))


def x_display_reachable(display: str) -> bool:
    """Whether an X client can connect to `display` (Qt aborts with exit 134 when it cannot).

    Asks libxcb itself (the library the xcb plugin connects with, so TCP, sockets and authorization count the
    same); when libxcb cannot be loaded here the answer is True and Qt is left to report."""
    import ctypes
    import ctypes.util

    try:
        xcb = ctypes.CDLL(ctypes.util.find_library("xcb") or "libxcb.so.1")
    except OSError:
        return True
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    connection = xcb.xcb_connect(display.encode(), None)
    try:
        return connection is not None and xcb.xcb_connection_has_error(connection) == 0
    finally:
        if connection is not None:
            xcb.xcb_disconnect(connection)  # also frees the error object xcb returns on failure


def platform_problem(environ: dict[str, str] | None = None) -> PlatformProblem | None:
    """Why Qt cannot open a window with the current platform plugin (None when nothing stands in the way).

    Only Linux is checked (the plugins of the Windows and macOS builds carry their dependencies)."""
    if not sys.platform.startswith("linux"):
        return None
    env = os.environ if environ is None else environ
    platform = current_platform(env)
    plugin = plugin_path(platform)
    if plugin is None:
        return None  # a plugin from elsewhere (QT_PLUGIN_PATH): let Qt report on it
    missing = missing_libraries(plugin)
    if missing:
        debian, fedora = zip(*(packages_for(name) for name in missing), strict=True)
        return PlatformProblem(
            platform, plugin, missing, tuple(dict.fromkeys(debian)), tuple(dict.fromkeys(fedora))
        )
    if platform == "xcb" and not env.get("DISPLAY"):
        return PlatformProblem(
            platform,
            plugin,
            reason="Letterpress cannot open a window: no X display (DISPLAY is not set). Start it from your "
            "desktop session, or run without a screen: QT_QPA_PLATFORM=offscreen python -m app --self-test",
        )
    if platform == "xcb" and not x_display_reachable(env["DISPLAY"]):
        return PlatformProblem(
            platform,
            plugin,
            reason=f"Letterpress cannot open a window: the X display {env['DISPLAY']!r} (DISPLAY) does not "
            "answer. Is the X server running, and may this user use it (XAUTHORITY)? Start Letterpress from "
            "your desktop session, or run without a screen: "
            "QT_QPA_PLATFORM=offscreen python -m app --self-test",
        )
    if platform == "wayland" and not env.get("WAYLAND_DISPLAY"):
        return PlatformProblem(
            platform,
            plugin,
            reason="Letterpress cannot open a window: no Wayland display (WAYLAND_DISPLAY is not set). Start "
            "it from your desktop session, or use QT_QPA_PLATFORM=xcb.",
        )
    return None


# PySide6 6.12.0 drops a reference on every Python-side `Signal.emit()` (it returns True without a reference)
# and on every Python slot called from C++ (the slot's return value): a Qt app aborts after a few hundred
# signals with "bool_dealloc"/"none_dealloc". 6.11.3 is fine.
BROKEN_QT_BINDINGS = {"6.12.0"}


def qt_binding_problem() -> str:
    """Why the installed PySide6 cannot run Letterpress ("" when it can)."""
    import PySide6

    version = PySide6.__version__
    if version in BROKEN_QT_BINDINGS:
        return (
            f"PySide6 {version} has a reference-counting bug that crashes Qt applications; "
            'install another version: pip install "PySide6-Essentials==6.11.3" "shiboken6==6.11.3"'
        )
    return ""


__all__ = [
    "BROKEN_QT_BINDINGS",
    "EXIT_QT_PLATFORM",
    "PACKAGES",
    "PlatformProblem",
    "current_platform",
    "missing_libraries",
    "packages_for",
    "platform_problem",
    "plugin_path",
    "qt_binding_problem",
    "x_display_reachable",
]
