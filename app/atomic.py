"""Atomic file writes: a crash, a full disk or a vanished folder never leaves a half-written file behind.

The data goes to a temporary file in the same folder (so the final rename stays on one file system), is flushed
and fsynced, and only then renamed over the target. If anything fails the temporary file is removed and the
original file is exactly as it was. Pure Python, no Qt, so settings, documents and recovery all share it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | Path, data: bytes, *, keep_mode: bool = True) -> None:
    """Replace `path` with `data` all at once; raises OSError (original untouched) when that is impossible."""
    target = Path(path)
    folder = target.parent
    mode: int | None = None
    if keep_mode:
        with contextlib.suppress(OSError):
            mode = target.stat().st_mode & 0o7777
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_folder(folder)


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """`atomic_write_bytes` for text; newlines are written exactly as given (no platform translation)."""
    atomic_write_bytes(path, text.encode(encoding))


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable where the platform allows it (POSIX); harmless elsewhere."""
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
