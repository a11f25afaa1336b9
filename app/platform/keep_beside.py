"""Keeping a file the writer wrote, that Letterpress could not read, beside it under a name of its own.

A settings file or a brief that does not parse is still the writer's work: before anything replaces it, its
bytes are kept next to it as `<name>.broken`, `<name>.broken-2`, ... — never over an earlier kept copy (a
second
broken file must not overwrite the first), and not again when an identical copy is already kept (a start with
the same broken file does not pile up copies). Pure Python, no Qt.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

MAX_READ = 64 * 1024**2  # a kept copy is the writer's text file; anything larger is not copied byte by byte
MAX_COPIES = 1000


def regular_size(path: Path) -> int | None:
    """The size of `path` when it is a regular file; None when it is absent or something else (a FIFO, a
    device, a folder: reading those could block or never end)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    import stat

    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _candidates(path: Path, suffix: str) -> list[Path]:
    return [
        path.with_name(f"{path.name}{suffix}" + ("" if i == 1 else f"-{i}")) for i in range(1, MAX_COPIES + 1)
    ]


def keep_beside(
    path: Path, data: bytes | None = None, *, suffix: str = ".broken", move: bool = False
) -> Path:
    """Keep the bytes of `path` (or `data`, what was read from it) as `<name><suffix>[-N]` next to it and
    return
    that name; an identical kept copy is reused. `move` renames the file itself there (it is then gone from
    its
    place). Raises OSError when nothing could be kept (the caller must then not overwrite the file)."""
    if data is None:
        with open(path, "rb") as fh:
            data = fh.read(MAX_READ)
    for candidate in _candidates(path, suffix):
        size = regular_size(candidate)
        if size is not None:
            if size == len(data):
                with contextlib.suppress(OSError), open(candidate, "rb") as fh:
                    if fh.read(len(data) + 1) == data:
                        if move:
                            os.unlink(path)
                        return candidate
            continue
        if os.path.lexists(candidate):
            continue
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(candidate)
            raise
        if move:
            os.unlink(path)
        return candidate
    raise OSError(f"more than {MAX_COPIES} kept copies of {path.name} already")
