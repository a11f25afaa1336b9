"""Atomic file writes: a crash, a full disk or a vanished folder never leaves a half-written file behind.

The data goes to a temporary file in the same folder (so the final rename stays on one file system), is
flushed and fsynced, and only then renamed over the target. If anything fails the temporary file is removed
and the original file is exactly as it was. Pure Python, no Qt, so settings, documents and recovery all share
it.

A rename gives the target a new inode, which would split a file with several hard links from its other names;
`write_in_place_with_backup` is the path for those: a verified backup copy first, then an in-place rewrite.
`on_temp` lets the caller note every temporary file before anything is written into it, so a crash in the
middle leaves a record of what to clean up at the next start (see `app.documents.recovery`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

TempHook = Callable[[Path], None]

# Temporary files are named `.<name>.<8 random characters>.lptmp` (`.lpbackup` for the backup of an in-place
# write): a suffix no other program uses, so a leftover can be told from another program's `.tmp` and only
# ours
# are ever removed (see `app.recovery.sweep_stray_temps`).
TEMP_SUFFIX = ".lptmp"
BACKUP_SUFFIX = ".lpbackup"
NAME_MAX = 255  # bytes in one file name on every file system Letterpress runs on


def temp_prefix(name: str) -> str:
    """`.<name>.` cut so that prefix + 8 random characters + the longer suffix fit NAME_MAX bytes: a document
    with a 250-byte name can still be saved (its temporary name would otherwise be 264 bytes, refused by the
    system). The cut is in bytes of the file system's encoding; a cut character becomes an escaped byte."""
    room = NAME_MAX - 2 - 8 - max(len(TEMP_SUFFIX), len(BACKUP_SUFFIX))
    raw = os.fsencode(name)
    if len(raw) > room:
        raw = raw[:room]
    return "." + os.fsdecode(raw) + "."


_umask_lock = threading.Lock()


def default_file_mode() -> int:
    """The mode a new file gets from the user's umask (what `touch` or any editor would create)."""
    mask: int | None = None
    with contextlib.suppress(OSError, ValueError):  # Linux: read it without changing it
        status = Path("/proc/self/status").read_text()
        found = re.search(r"^Umask:\s*([0-7]+)", status, re.MULTILINE)
        if found:
            mask = int(found.group(1), 8)
    if mask is None:
        with _umask_lock:
            mask = os.umask(0o077)
            os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(
    path: str | Path,
    data: bytes,
    *,
    keep_mode: bool = True,
    new_mode: int | None = None,
    on_temp: TempHook | None = None,
) -> None:
    """Replace `path` with `data` all at once; raises OSError (original untouched) when that is impossible.

    An existing file keeps its permission bits and, where allowed, its owner and group (`keep_mode`); a new
    one gets `new_mode` (None: 0600, right for private files such as recovery copies; documents pass
    `default_file_mode()`).
    """
    target = Path(path)
    folder = target.parent
    mode: int | None = None
    owner: tuple[int, int] | None = None
    if keep_mode:
        with contextlib.suppress(OSError):
            st = target.stat()
            mode = st.st_mode & 0o7777
            owner = (st.st_uid, st.st_gid)
    if mode is None:
        mode = new_mode
    fd, tmp_name = tempfile.mkstemp(prefix=temp_prefix(target.name), suffix=TEMP_SUFFIX, dir=folder)
    tmp = Path(tmp_name)
    try:
        if on_temp is not None:
            on_temp(tmp)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if owner is not None and hasattr(os, "chown"):
            # The replacement is a new file: give it the old owner and group back where we may (root, or a
            # group we belong to), so a save never hands someone's file to us; chmod after, as chown clears
            # setuid bits.
            with contextlib.suppress(OSError):
                os.chown(tmp, *owner)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_folder(folder)


class BackupKept(OSError):
    """An in-place write failed and the old content could not be put back: it is safe in `backup`."""

    def __init__(self, err: int, strerror: str, backup: Path) -> None:
        super().__init__(err, strerror)
        self.backup = backup


def write_in_place_with_backup(path: str | Path, data: bytes, *, on_temp: TempHook | None = None) -> None:
    """Rewrite `path` in place (same inode, so every hard link sees the new text) after a backup copy that is
    read back and compared. If the rewrite fails the old bytes are written back and the backup removed; if
    even that fails, `BackupKept` says where the old version is."""
    target = Path(path)
    original = target.read_bytes()
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=temp_prefix(target.name), suffix=BACKUP_SUFFIX, dir=target.parent
        )
    except PermissionError:
        # A writable file in a folder we may not write (a shared folder, a read-only parent): no backup file
        # can
        # sit beside it, so the old bytes stay in memory and are written back if the rewrite fails.
        try:
            _rewrite(target, data)
        except OSError:
            with contextlib.suppress(OSError):
                _rewrite(target, original)
            raise
        return
    backup = Path(tmp_name)
    try:
        if on_temp is not None:
            on_temp(backup)
        with os.fdopen(fd, "wb") as fh:
            fh.write(original)
            fh.flush()
            os.fsync(fh.fileno())
        if backup.read_bytes() != original:
            raise OSError(errno.EIO, "the backup copy could not be verified")
    except BaseException:
        with contextlib.suppress(OSError):
            backup.unlink()
        raise
    try:
        _rewrite(target, data)
    except OSError as exc:
        try:
            _rewrite(target, original)
        except OSError:
            raise BackupKept(exc.errno or errno.EIO, exc.strerror or str(exc), backup) from exc
        with contextlib.suppress(OSError):
            backup.unlink()
        raise
    backup.unlink()


def _rewrite(target: Path, data: bytes) -> None:
    with open(target, "r+b") as fh:
        fh.write(data)
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())


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
