"""Documents as bytes on disk: which encodings and line endings a file has, what is refused (binary data,
other encodings, devices, folders, files too large), and saving atomically with links, modes and owners kept.

Plain Python (no widgets): every failure is a `DocumentError` whose message a writer can act on.
`app.documents.controller` puts these behind the File menu; recovery reads its copies through them too.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from app.documents.line_endings import dominant, normalise, restore_endings, split_lines
from app.platform.atomic import (
    BackupKept,
    TempHook,
    atomic_write_bytes,
    default_file_mode,
    write_in_place_with_backup,
)

log = logging.getLogger(__name__)

MAX_BYTES = 200 * 1024 * 1024


class DocumentError(Exception):
    """A document could not be read or written; `message` says what happened and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ------------------------------------------------------------------------------------------------------------
# Reading and writing


@dataclass(frozen=True)
class TextFile:
    """A document's text (newlines always "\\n") plus what is needed to write it back the way it was.

    `encoding` is a Python codec name; "utf-16-le/-be" and "utf-32-le/-be" files always carry their byte-order
    mark, "utf-8-sig" is UTF-8 with one. `newline` is the dominant line ending (new lines get it); `raw` is
    the text exactly as decoded from disk, so `encode_text` can give every untouched line its own ending back.
    """

    text: str
    encoding: str = "utf-8"
    newline: str = "\n"
    raw: str | None = field(default=None, compare=False, repr=False)


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Codecs that do not write their own byte-order mark: `encode_text` puts it back in front.
_EXPLICIT_BOM = {
    "utf-32-le": codecs.BOM_UTF32_LE,
    "utf-32-be": codecs.BOM_UTF32_BE,
    "utf-16-le": codecs.BOM_UTF16_LE,
    "utf-16-be": codecs.BOM_UTF16_BE,
}


def decode_text(data: bytes, name: str = "This file") -> TextFile:
    """Decode UTF-8 (or UTF-8/16/32 with a byte-order mark, either byte order); refuse binary data and other
    encodings. Nothing is normalised away: `encode_text` of the result gives back `data` exactly."""
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), None)
    body = data
    if encoding is None:
        if looks_binary(data):
            raise DocumentError(
                f"{name} is not a text file (it contains binary "
                "data). Letterpress opens .txt and .md documents."
            )
        encoding = "utf-8"
    elif encoding in _EXPLICIT_BOM:
        body = data[len(_EXPLICIT_BOM[encoding]) :]
    try:
        raw = body.decode(encoding)
    except UnicodeDecodeError as exc:
        raise DocumentError(
            f"{name} is not valid {encoding.upper().removesuffix('-SIG')} text (byte {exc.start} cannot be "
            "read). It is probably in an older encoding such as Windows-1252 or Shift-JIS: open it in "
            "another editor, save it as UTF-8 and open it again."
        ) from exc
    _, endings = split_lines(raw)
    return TextFile(normalise(raw), encoding, dominant(endings), raw)


def looks_binary(data: bytes) -> bool:
    """NUL bytes, or many control characters. Tab, CR/LF, VT, FF and ESC are ordinary in text files
    (page breaks, old terminals' colour codes), so they never count."""
    head = data[:65536]
    if b"\x00" in head:
        return True
    controls = sum(1 for b in head if b < 0x20 and b not in b"\t\n\r\v\f\x1b")
    return bool(head) and controls / len(head) > 0.1


def not_a_document(p: Path, st: os.stat_result) -> str:
    """The sentence for a path that is there but is no regular file ('' when it is one)."""
    if stat.S_ISREG(st.st_mode):
        return ""
    if stat.S_ISDIR(st.st_mode):
        return f"{p} is a folder, not a document."
    kind = (
        "a named pipe (FIFO)"
        if stat.S_ISFIFO(st.st_mode)
        else "a device"
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
        else "a socket"
        if stat.S_ISSOCK(st.st_mode)
        else "not a regular file"
    )
    return (
        f"{p} is {kind}, not a document file; reading it could wait forever or never end, so Letterpress "
        "does not open it."
    )


def read_text_file(path: str | Path) -> TextFile:
    """The document at `path`, or a `DocumentError` that says why it cannot be opened.

    What the path is is checked before anything is read: a FIFO, a device (`/dev/zero`), a socket or a folder
    is refused with a sentence, never read (one would block the window, another fill the memory). The file is
    opened without blocking and checked again on the open descriptor (it may have been swapped since), and at
    most MAX_BYTES + 1 bytes are ever read (a file growing while it is read is refused too)."""
    p = Path(path)
    try:
        st = os.stat(p)
        problem = not_a_document(p, st)
        if problem:
            raise DocumentError(problem)
        if st.st_size > MAX_BYTES:
            raise DocumentError(
                f"{p.name} is {st.st_size / 2**20:.0f} MB; Letterpress opens documents up to "
                f"{MAX_BYTES // 2**20} MB."
            )
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as fh:
            problem = not_a_document(p, os.fstat(fh.fileno()))
            if problem:
                raise DocumentError(problem)
            data = fh.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise DocumentError(
                f"{p.name} grew beyond {MAX_BYTES // 2**20} MB while it was read; "
                "Letterpress "
                "opens documents up to that size."
            )
    except FileNotFoundError as exc:
        raise DocumentError(f"{p} does not exist (it may have been moved or deleted).") from exc
    except PermissionError as exc:
        raise DocumentError(f"You do not have permission to read {p}.") from exc
    except OSError as exc:
        raise DocumentError(f"{p} cannot be read: {exc.strerror or exc}.") from exc
    return decode_text(data, p.name)


def encode_text(doc: TextFile) -> bytes:
    """The bytes for `doc`: its own endings per line (see `app.documents.line_endings`), its encoding, its
    BOM."""
    text = restore_endings(doc.text, doc.raw, doc.newline)
    try:
        return _EXPLICIT_BOM.get(doc.encoding, b"") + text.encode(doc.encoding)
    except UnicodeEncodeError as exc:  # only possible for lone surrogates
        raise DocumentError(
            f"The text contains a character that cannot be saved as {doc.encoding} (position {exc.start})."
        ) from exc


def is_read_only(path: Path) -> bool:
    """True when the file exists and is marked read-only (checked by mode bits too, since root can write)."""
    try:
        st = path.stat()
    except OSError:
        return False
    return not (st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)) or not os.access(path, os.W_OK)


def write_text_file(path: str | Path, doc: TextFile, *, on_temp: TempHook | None = None) -> TextFile:
    """Save atomically; on failure the file on disk is exactly as before and `DocumentError` says why.
    Returns the document as now on disk (its `raw` is what the next save keeps line endings from).

    Links are respected: a symbolic link is written through (the target is replaced atomically, next to the
    target, and the link stays a link); a file with several hard links is rewritten in place after a verified
    backup, so every name sees the new text. A new file gets the umask's default mode, an existing one keeps
    its own. `on_temp` is told about every temporary file first (crash clean-up, see
    `app.documents.recovery`).
    """
    p = Path(path)
    real = Path(os.path.realpath(p))
    with contextlib.suppress(OSError):
        problem = not_a_document(p, os.stat(real))
        if problem:
            raise DocumentError(
                problem.replace("does not open it", "does not save onto it")
                + " Use Save As to choose a file."
            )
    if is_read_only(real):
        raise DocumentError(f"{p.name} is read-only. Use Save As to save a copy somewhere else.")
    raw = restore_endings(doc.text, doc.raw, doc.newline)
    data = encode_text(TextFile(doc.text, doc.encoding, doc.newline, raw))
    try:
        st = real.stat()
    except OSError:
        st = None
    try:
        if st is not None and stat.S_ISREG(st.st_mode) and _needs_in_place(real, st):
            write_in_place_with_backup(real, data, on_temp=on_temp)
        else:
            atomic_write_bytes(real, data, new_mode=default_file_mode(), on_temp=on_temp)
    except BackupKept as exc:
        raise DocumentError(
            f"{p.name} was not saved ({exc.strerror}) and could not be put back as it was; its previous "
            f"version is safe in {exc.backup}. Your text is still in the editor: use Save As to save it "
            "elsewhere."
        ) from exc
    except OSError as exc:
        raise DocumentError(_save_failure(p, exc, real)) from exc
    return TextFile(doc.text, doc.encoding, doc.newline, raw)


def _needs_in_place(real: Path, st: os.stat_result) -> bool:
    """Whether replacing the file by a new one (a rename) would lose something the file has, so it must be
    rewritten in place (after a verified backup) instead: its other hard links; its owner and group, when we
    are not root and not its owner (a group member's save, another user's 0666 file in a sticky /tmp-like
    folder, where a rename is not even allowed); or when its folder cannot be written but the file can."""
    if st.st_nlink > 1:
        return True
    if hasattr(os, "geteuid") and os.geteuid() != 0 and st.st_uid != os.geteuid():
        return True
    return not os.access(real.parent, os.W_OK) and os.access(real, os.W_OK)


def _save_failure(p: Path, exc: OSError, real: Path | None = None) -> str:
    """The message for a failed save of `p`; `real` is the file really written (a symbolic link's target)."""
    what = f"{p.name} was not saved"
    kept = "; the copy on disk is unchanged" if p.exists() else ""
    folder = (real or p).parent
    via = f" ({p.name} is a link to {real})" if real is not None and real != p and p.is_symlink() else ""
    if exc.errno == errno.ENOSPC:
        return f"{what}: the disk is full{kept}. Free some space or use Save As to save elsewhere."
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{what}: you cannot write to {folder}{via}{kept}. Use Save As to save elsewhere."
    if exc.errno == errno.ENOENT:
        return f"{what}: the folder {folder} no longer exists{via}. Use Save As to choose another folder."
    return f"{what}: {exc.strerror or exc}{kept}. Your text is still in the editor; try Save As."


def final_save_path(chosen: str | Path) -> Path:
    """The file a Save As to `chosen` writes: `.md` is added when the name has no extension."""
    target = Path(chosen)
    if not target.suffix:
        target = target.with_name(target.name + ".md")
    return target


def same_file(a: Path, b: Path | None) -> bool:
    if b is None:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
