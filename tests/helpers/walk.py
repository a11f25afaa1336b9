"""The files a request passes through, traced: every function of `app/` or `engine/` that runs between two
moments, on any thread, in the order each file is first entered (tests/e2e/test_rewrite_walk.py).

`WalkTracer.install()` must come before the window (and so its engine thread) exists: Python gives a profile
function only to threads started after `threading.setprofile`. Recording is off until `start()`."""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_ROOTS = (str(ROOT / "app") + os.sep, str(ROOT / "engine") + os.sep)


@dataclass
class WalkTracer:
    """First entries into project files, as (thread name, path relative to the repository)."""

    visits: list[tuple[str, str]] = field(default_factory=list)
    _seen: set[tuple[str, str]] = field(default_factory=set)
    _on: bool = False
    _gone: bool = False

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if self._gone:  # uninstalled: a thread that inherited the function drops it at its next call
            sys.setprofile(None)
            return
        if not self._on or event != "call":
            return
        name = frame.f_code.co_filename
        if not name.startswith(_ROOTS):
            return
        key = (threading.current_thread().name, os.path.relpath(name, ROOT).replace(os.sep, "/"))
        if key not in self._seen:
            self._seen.add(key)
            self.visits.append(key)

    def install(self) -> None:
        threading.setprofile(self._profile)

    def start(self) -> None:
        self._on = True
        sys.setprofile(self._profile)

    def stop(self) -> None:
        self._on = False
        sys.setprofile(None)

    def uninstall(self) -> None:
        self.stop()
        self._gone = True
        threading.setprofile(None)  # type: ignore[arg-type]

    def files(self) -> list[str]:
        """Every file entered, in first-entry order (across threads)."""
        out: list[str] = []
        for _, path in self.visits:
            if path not in out:
                out.append(path)
        return out


def room(path: str) -> str:
    """The room a file belongs to: its folder (`app/assist`, `engine`, `engine/weights`...)."""
    return path.rsplit("/", 1)[0]


def room_sequence(files: list[str]) -> list[str]:
    """The rooms in walking order, consecutive files of one room counted once."""
    rooms: list[str] = []
    for path in files:
        if not rooms or rooms[-1] != room(path):
            rooms.append(room(path))
    return rooms
