"""Words and a percentage for a model load's progress (the status bar and the model manager show the same).

A phase with a measurable share (reading or quantizing the weights: bytes done of the total) shows its
percent; one without (starting the engine, preparing the checkpoint, moving buffers to the GPU, warming up)
shows "Preparing…" with what is happening, and the bar turns into a busy indicator instead of sitting at 0%.
"""

from __future__ import annotations

from engine.api import LoadProgress

# LoadProgress.stage -> what the writer reads.
STAGES = {
    "starting": "starting the engine",
    "preparing": "reading the checkpoint",
    "loading": "reading weights",
    "reading": "reading weights",
    "reading cache": "reading the 4-bit cache",
    "quantizing": "quantizing to 4 bits",
    "moving to the GPU": "moving to the GPU",
    "warming up": "warming up",
    "ready": "ready",
}


def phase(progress: LoadProgress) -> str:
    """The phase in words ("reading weights", "quantizing to 4 bits", …)."""
    return STAGES.get(progress.stage, progress.stage)


def percent(progress: LoadProgress) -> int | None:
    """The share done in percent, or None for a phase without a measurable fraction."""
    if not progress.measurable or progress.stage in ("warming up", "moving to the GPU"):
        return None
    return max(0, min(100, round(100 * progress.fraction)))


def describe(progress: LoadProgress) -> str:
    """One line for the status bar: "Loading model: reading weights 42%" or "Preparing… warming up"."""
    share = percent(progress)
    if share is None:
        return f"Preparing… {phase(progress)}"
    if progress.bytes_total:
        return (
            f"Loading model: {phase(progress)} {share}% "
            f"({_size(progress.bytes_done)} of {_size(progress.bytes_total)})"
        )
    return f"Loading model: {phase(progress)} {share}%"


def _size(n: int) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    return f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"  # a tiny checkpoint said "0 MB of 1 MB"


__all__ = ["STAGES", "describe", "percent", "phase"]
