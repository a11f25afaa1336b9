"""The UI stall probe: a 5 ms timer on the UI thread whose longest gap is the UI's worst stall.

Why the run delay: on a shared machine the scheduler can leave the UI thread runnable but off every core for
tens of milliseconds (CI measured a 74 ms gap while one draft took 9.4 s instead of the quiet 3 s). That wait
is the machine's, not the app's: Linux counts it per thread (`/proc/thread-self/schedstat`, the second field:
nanoseconds spent waiting on a runqueue). A gap's *app* stall is its length less the timer interval less that
wait; what the app can cause (work on the UI thread, the GIL held by another thread, a collector pause) stays
in it. Where schedstat is missing the wait reads as 0 and the raw gap is judged.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QElapsedTimer, Qt, QTimer

INTERVAL_MS = 5


@dataclass(frozen=True)
class Gap:
    """One probe interval: how long it really took (less the interval), how much of that the UI thread waited
    for a core, and what the app was doing."""

    ms: float
    waited_ms: float
    where: str

    @property
    def app_ms(self) -> float:
        return self.ms - self.waited_ms


class _RunDelay:
    """The calling thread's cumulative runqueue wait in ms (opened on the thread it measures)."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self._fd = None

    def ms(self) -> float:
        if self._fd is None:
            return 0.0
        try:
            return int(os.pread(self._fd, 128, 0).split()[1]) / 1e6
        except (OSError, IndexError, ValueError):
            return 0.0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class StallProbe:
    """Start it on the UI thread; `gaps` grows every tick; `worst()` is the gap with the largest app stall."""

    def __init__(self, where: Callable[[], str] = lambda: "") -> None:
        self.gaps: list[Gap] = []
        self._where = where
        self._clock = QElapsedTimer()
        self._timer = QTimer()
        self._timer.setInterval(INTERVAL_MS)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._tick)
        self._delay: _RunDelay | None = None
        self._last_delay = 0.0

    def start(self) -> None:
        self._delay = _RunDelay()
        self._last_delay = self._delay.ms()
        self._clock.start()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        if self._delay is not None:
            self._delay.close()

    def _tick(self) -> None:
        gap = self._clock.nsecsElapsed() / 1e6 - INTERVAL_MS
        self._clock.restart()
        delay = self._delay.ms() if self._delay is not None else 0.0
        waited, self._last_delay = max(0.0, delay - self._last_delay), delay
        self.gaps.append(Gap(gap, min(waited, max(gap, 0.0)), self._where()))

    def worst(self, skip: int = 0) -> Gap:
        measured = self.gaps[skip:]
        return max(measured, key=lambda g: g.app_ms) if measured else Gap(0.0, 0.0, "")

    def summary(self, skip: int = 0) -> str:
        w = self.worst(skip)
        raw = max((g.ms for g in self.gaps[skip:]), default=0.0)
        waited = sum(g.waited_ms for g in self.gaps[skip:])
        at = f", at {w.where}" if w.where else ""
        return (
            f"worst app stall {w.app_ms:.1f} ms (gap {w.ms:.1f} ms, {w.waited_ms:.1f} ms of it waiting for a "
            f"core{at}); worst raw gap {raw:.1f} ms; {waited:.0f} ms waited for a core in all; "
            f"{len(self.gaps) - skip} ticks"
        )
