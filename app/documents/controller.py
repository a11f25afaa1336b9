"""Opening and saving documents so that no word is ever lost: strict decoding, atomic saves, clear refusals.

Two layers. The functions (`read_text_file`, `write_text_file`, `RecentFiles`) are plain Python and raise
`DocumentError` with a message a writer can act on. `DocumentController` puts them behind the File menu of a
window (New, Open, Open Recent, Save, Save As, Quit), keeps the title's modified marker, and asks before
unsaved work is closed. Dialog calls are attributes (`ask_unsaved`, `choose_open_path`, `choose_save_path`,
`ask_replace`, `ask_already_open`, `ask_external_change`, `show_compare`, `show_error`) so tests replace them
instead of clicking modal boxes.

What a save and an open guard against, and where it lives: exact bytes and per-line endings
(`app.documents.line_endings`), links and file modes (`write_text_file`, `app.platform.atomic`), changes made
on disk by other programs (`app.documents.external_change`), one file, one editor (`app.documents.one_editor`,
`app.platform.locks`), temporary files of an interrupted save (`save_journal`, kept by
`app.documents.recovery`).
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import json
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent
from PySide6.QtWidgets import QFileDialog, QMainWindow, QMenu, QMessageBox, QPlainTextEdit, QWidget

from app.config.commands import MENU_BY_ID
from app.documents.external_change import (
    CompareDialog,
    DiskState,
    ExternalChangeWatcher,
    Resolution,
    compare,
    disk_state,
)
from app.documents.line_endings import dominant, normalise, restore_endings, split_lines
from app.documents.one_editor import EditorClaim, Elsewhere
from app.platform.atomic import (
    BackupKept,
    TempHook,
    atomic_write_bytes,
    default_file_mode,
    write_in_place_with_backup,
)
from app.platform.locks import FileLock
from app.platform.privacy import note_document
from app.ui import actions
from app.ui.display_breaks import add_breaks, real_text

log = logging.getLogger(__name__)

MAX_BYTES = 200 * 1024 * 1024
FILE_FILTER = "Text and Markdown (*.txt *.md *.markdown *.text);;All files (*)"
Choice = Literal["save", "discard", "cancel"]
OpenChoice = Literal["switch", "read-only", "cancel"]


class SaveJournal(Protocol):
    """Where a save notes its temporary files before writing them (see `RecoveryManager.note_temp`)."""

    def note_temp(self, temp: Path, target: Path) -> None: ...

    def temps_done(self) -> None: ...


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
        if _looks_binary(data):
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


def _looks_binary(data: bytes) -> bool:
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


def _same_file(a: Path, b: Path | None) -> bool:
    if b is None:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def editor_text(editor: QPlainTextEdit) -> str:
    """The document exactly as typed: unlike toPlainText, this keeps no-break spaces and line separators,
    and a display break in an over-long line is the space it stands for (`app.ui.display_breaks`)."""
    return real_text(editor.document())


# ------------------------------------------------------------------------------------------------------------
# Recent files


class RecentFiles:
    """The most recently opened or saved documents, newest first, in a small JSON file (written
    atomically)."""

    def __init__(self, path: Path, limit: int = 10) -> None:
        self.path = path
        self.limit = limit

    def load(self) -> list[Path]:
        try:
            items = json.loads(self.path.read_text(encoding="utf-8"))
            return [Path(p) for p in items if isinstance(p, str)][: self.limit]
        except (OSError, ValueError, TypeError):
            return []

    def add(self, path: Path) -> list[Path]:
        path = path.resolve()
        items = [path] + [p for p in self.load() if p != path]
        self._store(items[: self.limit])
        return items[: self.limit]

    def remove(self, path: Path) -> None:
        self._store([p for p in self.load() if p != path])

    def clear(self) -> None:
        self._store([])

    def _store(self, items: list[Path]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.path, json.dumps([str(p) for p in items], indent=1).encode("utf-8"))
        except OSError as exc:
            log.warning("recent files list not saved: %s", exc.strerror or exc)


# ------------------------------------------------------------------------------------------------------------
# The File menu


def _ask_unsaved_box(parent: QWidget, name: str) -> Choice:
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle("Unsaved changes")
    box.setText(f"Save the changes to “{name}” before closing?")
    box.setInformativeText("If you don't save, your changes since the last save will be lost.")
    box.setStandardButtons(
        QMessageBox.StandardButton.Save
        | QMessageBox.StandardButton.Discard
        | QMessageBox.StandardButton.Cancel
    )
    box.setDefaultButton(QMessageBox.StandardButton.Save)
    answer = box.exec()
    if answer == QMessageBox.StandardButton.Save:
        return "save"
    if answer == QMessageBox.StandardButton.Discard:
        return "discard"
    return "cancel"


# a file rewritten faster than the writer can answer: give up (cancel) after this many questions
MAX_REASKS = 20


class DocumentController(QObject):
    """Owns the current document's path/encoding and the File menu of `window`; the editor owns the text.

    Signals: `opened(path)` after a document is loaded, `saved(path)` after a successful save, `discarded()`
    when unsaved changes are thrown away (new/open/close), `message(text)` for the status bar.
    """

    opened = Signal(str)
    saved = Signal(str)
    discarded = Signal()
    message = Signal(str)
    pathChanged = Signal(str)
    externalChange = Signal(str)  # "deleted", "reloaded", "kept", "cancelled": what came of a change on disk

    def __init__(
        self,
        window: QMainWindow,
        editor: QPlainTextEdit,
        settings: object | None = None,
        *,
        recent_path: Path | None = None,
        menu: QMenu | None = None,
        lock_folder: Path | None = None,
    ) -> None:
        super().__init__(window)
        self.window = window
        self.editor = editor
        self.settings = settings
        self.path: Path | None = None
        self.encoding = "utf-8"
        self.newline = "\n"
        self.raw: str | None = None  # the text as on disk at the last open/save: each line's own ending
        if recent_path is None:
            from app.config.settings import data_dir

            recent_path = data_dir() / "recent.json"
        self.recent = RecentFiles(recent_path)
        # One file, one editor: the lock of the document this window edits (app.documents.one_editor).
        self.claim = EditorClaim(lock_folder or recent_path.parent / "recovery" / "locks", self._raise_window)
        self.read_only = False
        self.save_journal: SaveJournal | None = None  # the recovery manager: notes temp files of each save
        self.keep_copy: Callable[[str, str | None], Path] | None = None  # recovery copy before a reload
        self.ask_already_open: Callable[[str, str], OpenChoice] = self._ask_already_open_box
        # A change made on disk by another program (app.documents.external_change): asked, compared, never
        # overwritten.
        self.ask_external_change: Callable[[str, bool], Resolution] = self._ask_external_change_box
        self.show_compare: Callable[[str, str, str], Resolution] = self._compare_dialog
        self._disk: DiskState | None = None
        self._resolving = False
        self._deleted_reported = False
        # The disk version the writer was last told about without adopting it (cancelled, or not reloadable):
        # the watcher fires for every new file in the folder and must not ask about it again each time.
        self._answered: DiskState | None = None
        self._loaded: str | None = None  # the editor's text right after the file was loaded or saved
        self.watcher = ExternalChangeWatcher(self)
        self.watcher.noticed.connect(self._on_external_change)
        self.ask_unsaved: Callable[[str], Choice] = lambda name: _ask_unsaved_box(self.window, name)
        self.choose_open_path: Callable[[], str] = self._open_dialog
        self.choose_save_path: Callable[[str], str] = self._save_dialog
        self.ask_replace: Callable[[Path], bool] = self._ask_replace_box
        self.show_error: Callable[[str, str], object] = lambda title, text: QMessageBox.warning(
            self.window, title, text
        )
        self._install_actions(menu)
        self._dirty = True
        self._snap: tuple[str, str | None] | None = None
        if editor.document().isEmpty():
            # Nothing to lose; layout calls such as setDocumentMargin mark a fresh document "modified".
            editor.document().setModified(False)
        editor.document().modificationChanged.connect(self._update_title)
        editor.document().contentsChanged.connect(self._mark_dirty)
        guards = getattr(window, "close_guards", None)
        if isinstance(guards, list):  # the main window asks its guards before it shuts anything down
            guards.append(self._close_guard)
        else:
            window.installEventFilter(self)
        self._update_title()

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def display_name(self) -> str:
        return self.path.name if self.path else "Untitled"

    def is_modified(self) -> bool:
        return self.editor.document().isModified()

    def text(self) -> str:
        return editor_text(self.editor)

    def recovery_snapshot(self) -> tuple[str, str | None] | None:
        """(text, path) of unsaved work for the autosave, or None when everything is saved. The text is only
        copied again after the document changed, so an idle 10 MB document costs nothing per tick."""
        if not self.is_modified():
            return None
        if self._dirty or self._snap is None:
            self._dirty = False
            self._snap = (self.text(), str(self.path) if self.path else None)
        return self._snap

    def _mark_dirty(self) -> None:
        self._dirty = True

    # -- actions ---------------------------------------------------------------------------------------------

    def new(self) -> bool:
        if not self.maybe_save():
            return False
        self.claim.release()
        self._set_text("", None, "utf-8", "\n")
        self._set_read_only(False)
        return True

    def open(self, path: str | Path | None = None, *, read_only: bool = False) -> bool:
        """Open `path` (or ask for one); unsaved work is offered for saving first. Returns True when opened.

        A file another Letterpress window edits is not opened for editing twice: the writer is asked to switch
        to that window or to open it read-only."""
        if path is None:
            chosen = self.choose_open_path()
            if not chosen:
                return False
            path = chosen
        note_document(path)
        p = Path(path)
        try:
            doc = read_text_file(p)
        except DocumentError as exc:
            self.show_error("Cannot open document", exc.message)
            if not p.exists():
                self.recent.remove(p.resolve())
                self._rebuild_recent_menu()
            return False
        lock: FileLock | None = None
        if not read_only:
            claimed = self.claim.try_claim(p)
            if isinstance(claimed, Elsewhere):
                choice = self.ask_already_open(p.name, claimed.where)
                if choice == "switch":
                    if not EditorClaim.switch_to(claimed):
                        self.show_error(
                            "Cannot switch",
                            f"The window that edits {p.name} did not answer. "
                            "Open it read-only, or close it there first.",
                        )
                    return False
                if choice != "read-only":
                    return False
                read_only = True
            else:
                lock = claimed
        if not self.maybe_save():
            if lock is not None and lock is not self.claim.lock:
                lock.release()
            return False
        self.claim.adopt(lock, p)
        self._set_text(doc.text, p, doc.encoding, doc.newline, doc.raw)
        self._set_read_only(read_only)
        self.recent.add(p)
        self._rebuild_recent_menu()
        opened = f"Opened {p.name}" + (" read-only" if read_only else "")
        if lock is None and not read_only and self.claim.problem:
            opened += f" — not protected against a second window: {self.claim.problem}"
        if doc.raw is not None and self._loaded != doc.text:
            opened += (
                f". {p.name} contains characters the editor cannot show (such as U+FDD0/U+FDD1 or a "
                "second byte-order mark); saving without an edit keeps them, but an edit replaces them"
            )
        self.message.emit(opened)
        self.opened.emit(str(p))  # after the message: what listeners report about the file stays visible
        return True

    def restore(self, text: str, path: str | Path | None, saved_at: float | None = None) -> None:
        """Put recovered text in the editor as unsaved changes to `path` (None: an untitled document).

        `saved_at` is when the copy was written: a file changed on disk after that (another program, after the
        crash) is treated as an external change, so the next save asks before replacing it."""
        p = Path(path) if path else None
        encoding, newline, raw = "utf-8", "\n", None
        if p is not None and p.is_file():
            try:
                on_disk = read_text_file(p)
                encoding, newline, raw = on_disk.encoding, on_disk.newline, on_disk.raw
            except DocumentError:
                pass
        lock, read_only = None, False
        if p is not None:
            claimed = self.claim.try_claim(p)
            if isinstance(claimed, Elsewhere):  # keep the text; saving it goes through Save As
                read_only = True
                self.message.emit(f"{p.name} is open in {claimed.where}; the recovered text opens read-only.")
            else:
                lock = claimed
        self.claim.adopt(lock, p)
        self._set_text(text, p, encoding, newline, raw)
        self._set_read_only(read_only)
        self.editor.document().setModified(True)
        if p is not None and saved_at is not None and self._disk is not None:
            with contextlib.suppress(OSError):
                if p.stat().st_mtime > saved_at:
                    self._disk = DiskState(-1, -1, "")  # matches no file: saving asks (reload, keep, compare)
                    when = datetime.fromtimestamp(saved_at).strftime("%Y-%m-%d %H:%M")
                    self.message.emit(
                        f"{p.name} was changed on disk after this copy was made ({when}); saving "
                        "asks first, and Compare shows both versions."
                    )

    def save(self) -> bool:
        if self.path is None:
            return self.save_as()
        if self.read_only:
            self.message.emit(
                f"{self.display_name} is open read-only (another window edits it): choose where "
                "to save this copy."
            )
            return self.save_as()
        return self._write(self.path)

    def save_as(self) -> bool:
        """Ask for a name and save there. The name that is checked is the one written: the default extension
        is added before the "replace?" question, never after it, so no file is replaced unasked."""
        suggested = str(self.path) if self.path else str(self.start_folder() / "Untitled.md")
        chosen = self.choose_save_path(suggested)
        if not chosen:
            return False
        target = final_save_path(chosen)
        own = _same_file(target, self.path) and not self.read_only
        if target.is_dir():
            self.show_error("Document not saved", f"{target} is a folder. Choose a file name.")
            return False
        # Whether another window edits it comes first: a "Replace?" answered yes could not be acted on.
        claimed = self.claim.try_claim(target)
        if isinstance(claimed, Elsewhere):
            self.show_error(
                "Document not saved",
                f"{target.name} is open in {claimed.where}. Save there, or choose another name.",
            )
            return False
        if target.exists() and not own and not self.ask_replace(target):
            if claimed is not None and claimed is not self.claim.lock:
                claimed.release()
            return False
        if self._write(target):
            self.claim.adopt(claimed, target)
            self._set_read_only(False)
            if target != self.path:
                self.path = target
                self._dirty = True
                self.pathChanged.emit(str(target))
                self._update_title()
            return True
        if claimed is not None and claimed is not self.claim.lock:
            claimed.release()
        return False

    def maybe_save(self) -> bool:
        """Before unsaved work goes away: ask Save / Discard / Cancel. True means it is fine to go on."""
        if not self.is_modified():
            return True
        choice = self.ask_unsaved(self.display_name)
        if choice == "save":
            return self.save()
        if choice == "discard":
            self.editor.document().setModified(False)
            self.discarded.emit()
            return True
        return False

    def quit(self) -> None:
        self.window.close()

    # -- internals -------------------------------------------------------------------------------------------

    def _write(self, target: Path) -> bool:
        note_document(target)
        same = self.path is not None and (target == self.path or _same_file(target, self.path))
        if same and not self._disk_allows_save(target):
            return False
        doc = TextFile(self._unedited_text(), self.encoding, self.newline, self.raw)
        journal = self.save_journal
        on_temp = (lambda temp: journal.note_temp(temp, Path(os.path.realpath(target)))) if journal else None
        try:
            written = write_text_file(target, doc, on_temp=on_temp)
        except DocumentError as exc:
            log.warning("save failed: %s", exc.message)
            self.show_error("Document not saved", exc.message)
            self.message.emit(exc.message)
            return False
        finally:
            if journal is not None:
                journal.temps_done()
        self.raw = written.raw
        self._loaded = self.text()
        self._disk = disk_state(target)
        self._deleted_reported = False
        self._answered = None
        if self.claim.holds(target):
            self.claim.refresh(target)  # a replaced file has a new inode: its lock follows it
        self.watcher.watch(target)
        self.editor.document().setModified(False)
        self.recent.add(target)
        self._rebuild_recent_menu()
        self.saved.emit(str(target))
        self.message.emit(f"Saved {target.name}")
        return True

    def _unedited_text(self) -> str:
        """The text to save. Qt's document cannot hold everything a file can (U+FDD0/U+FDD1 become line
        breaks, a leading U+FEFF is dropped), so while the writer has not changed what the editor showed, the
        text as read from disk is saved, keeping the file byte for byte."""
        text = self.text()
        if self.raw is not None and self._loaded is not None and text == self._loaded:
            return normalise(self.raw)
        return text

    def _set_text(
        self, text: str, path: Path | None, encoding: str, newline: str, raw: str | None = None
    ) -> None:
        self.editor.setPlainText(text)  # also clears the undo history: undo never crosses documents
        add_breaks(self.editor.document())  # over-long lines shown in ~4 K blocks (the text is unchanged)
        self.editor.document().setModified(False)
        # What Qt made of the file's text (it can differ: see `_unedited_text`); None when `text` is not the
        # file's.
        self._loaded = self.text() if raw is not None and text == normalise(raw) else None
        self.path, self.encoding, self.newline, self.raw = path, encoding, newline, raw
        note_document(path)  # the log hides its name from now on
        self._disk = disk_state(path) if path is not None else None
        self._deleted_reported = False
        self._answered = None
        self.watcher.watch(path)
        self._dirty = True
        self.pathChanged.emit(str(path) if path else "")
        self._update_title()

    # -- changes made on disk by others ----------------------------------------------------------------------

    def reload(self) -> bool:
        """Read the document again from disk. Unsaved edits go to a recovery copy first (offered at the next
        start); if that copy cannot be written nothing is reloaded."""
        if self.path is None:
            return False
        try:
            doc = read_text_file(self.path)
        except DocumentError as exc:
            self.show_error("Cannot reload document", exc.message)
            return False
        had_edits = self.is_modified()
        if had_edits:
            if self.keep_copy is None:
                self.show_error(
                    "Not reloaded",
                    "There is no recovery folder to keep your unsaved version in, "
                    "so nothing was reloaded. Use Save As to keep your version.",
                )
                return False
            try:
                copy = self.keep_copy(self.text(), str(self.path))
            except OSError as exc:
                self.show_error(
                    "Not reloaded",
                    f"Your unsaved version could not be kept as a recovery copy "
                    f"({exc.strerror or exc}), so nothing was reloaded. Use Save As to keep it.",
                )
                return False
            self.message.emit(
                f"Your unsaved version of {self.display_name} was kept as a recovery copy "
                f"({copy}); Letterpress offers it at the next start."
            )
        read_only = self.read_only
        self._set_text(doc.text, self.path, doc.encoding, doc.newline, doc.raw)
        self._set_read_only(read_only)
        if had_edits:
            self.discarded.emit()
        return True

    def check_disk(self) -> None:
        """Look at the file on disk now (what the watcher triggers)."""
        self._on_external_change()

    def _disk_allows_save(self, target: Path) -> bool:
        verdict, now = compare(target, self._disk)
        if verdict == "same":
            return True
        if verdict == "deleted":
            self.message.emit(f"{target.name} had been deleted or moved on disk; saving recreated it.")
            return True
        if verdict == "unreadable":
            text = (
                f"{target.name} can no longer be read (its permissions changed, or something that is not "
                "a "
                "file took its place), so Letterpress cannot check whether another program changed it; "
                "nothing was saved. Your text is still here: use Save As to save it elsewhere."
            )
            self.show_error("Document not saved", text)
            self.message.emit(text)
            return False
        for _ in range(MAX_REASKS):
            choice = self._resolve(saving=True)
            if choice == "keep" and not self._changed_since(target, now):
                break
            if choice != "keep":
                break
            # The file changed again while the question (or the Compare view) was open: the answer was about
            # another version, so it is asked again about this one.
            _, now = compare(target, now)
            self.message.emit(f"{target.name} changed on disk again while you were deciding; asking again.")
        else:
            choice = "cancel"
        self.externalChange.emit({"keep": "kept", "reload": "reloaded"}.get(choice, "cancelled"))
        if choice == "keep":
            return True
        if choice == "reload":
            self.reload()
        return False

    @staticmethod
    def _changed_since(target: Path, seen: DiskState | None) -> bool:
        """Whether the file is no longer the version `seen` (content, not time), e.g. while a question
        was open."""
        return compare(target, seen)[0] != "same"

    def _resolve(self, *, saving: bool) -> Resolution:
        choice = self.ask_external_change(self.display_name, saving)
        if choice == "compare":
            try:
                theirs = read_text_file(self.path).text if self.path else ""
            except DocumentError as exc:
                theirs = f"(the file on disk cannot be read: {exc.message})"
            choice = self.show_compare(self.display_name, self.text(), theirs)
        return choice if choice in ("reload", "keep") else "cancel"

    def _on_external_change(self) -> None:
        if self._resolving or self.path is None:
            return
        verdict, now = compare(self.path, self._disk, quick=True)
        if verdict == "same":
            if now is not None:
                self._disk = now
            return
        self._resolving = True
        try:
            if verdict == "unreadable":
                if self._answered is None or self._answered.digest != "unreadable":
                    self._answered = now
                    self.message.emit(
                        f"{self.display_name} can no longer be read (permission denied, or it "
                        "is no "
                        "longer a file). Your text is still here; Save As saves it elsewhere."
                    )
                    self.externalChange.emit("unreadable")
                return
            if verdict == "deleted":
                if not self._deleted_reported:
                    self._deleted_reported = True
                    self.editor.document().setModified(True)  # closing now asks; Save recreates the file
                    self.message.emit(
                        f"{self.display_name} was deleted or moved on disk. Your text is still "
                        "here: Save recreates the file."
                    )
                    self.externalChange.emit("deleted")
                return
            self._deleted_reported = False
            seen = self._answered
            if now is not None and seen is not None and (seen.size, seen.digest) == (now.size, now.digest):
                return  # already asked (or reported) about exactly this version; Save still asks again
            if not self.is_modified():  # nothing of the writer's can be lost: follow the disk
                if self.reload():
                    self.message.emit(f"{self.display_name} was changed by another program and reloaded.")
                    self.externalChange.emit("reloaded")
                else:
                    self._answered = now
                return
            choice = self._resolve(saving=False)
            if choice == "reload":
                if not self.reload():
                    self._answered = now
            elif choice == "cancel":
                self._answered = now
            elif choice == "keep":
                self._disk = now  # the writer chose their version over this one: the next save replaces it
                self.message.emit(
                    f"Keeping your version of {self.display_name}; saving replaces the one on disk."
                )
                if self.path is not None and self._changed_since(self.path, now):
                    # It changed again while the question was open: that newer version was never shown, so
                    # the question comes again (and a save asks in any case, its hash differs from `now`).
                    QTimer.singleShot(0, self._on_external_change)
            self.externalChange.emit({"keep": "kept", "reload": "reloaded"}.get(choice, "cancelled"))
        finally:
            self._resolving = False

    def _ask_external_change_box(self, name: str, saving: bool) -> Resolution:
        box = QMessageBox(self.window)
        box.setIcon(QMessageBox.Icon.Warning)
        box.setWindowTitle("Changed on disk")
        box.setText(f"“{name}” was changed on disk by another program since you opened or saved it.")
        box.setInformativeText(
            "Reload it (your unsaved edits are kept as a recovery copy first), keep your "
            "version" + (" and save it" if saving else "") + ", or compare the two."
        )
        reload_button = box.addButton("Reload", QMessageBox.ButtonRole.DestructiveRole)
        keep = box.addButton("Save mine anyway" if saving else "Keep mine", QMessageBox.ButtonRole.AcceptRole)
        compare_button = box.addButton("Compare…", QMessageBox.ButtonRole.ActionRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(compare_button)
        box.exec()
        clicked = box.clickedButton()
        if clicked is reload_button:
            return "reload"
        if clicked is keep:
            return "keep"
        return "compare" if clicked is compare_button else "cancel"

    def _compare_dialog(self, name: str, mine: str, theirs: str) -> Resolution:
        dialog = CompareDialog(self.window, name, mine, theirs)
        dialog.exec()
        return dialog.choice

    def _set_read_only(self, read_only: bool) -> None:
        self.read_only = read_only
        self.editor.setReadOnly(read_only)
        self._update_title()

    def _raise_window(self) -> None:
        self.window.show()
        self.window.raise_()
        self.window.activateWindow()

    def _close_guard(self) -> bool:
        """The window's close guard: ask about unsaved work; once the window really closed, let the lock
        go."""
        if not self.maybe_save():
            return False
        QTimer.singleShot(0, self._release_if_closed)
        return True

    def _release_if_closed(self) -> None:
        if not self.window.isVisible():
            self.claim.release()

    def _ask_already_open_box(self, name: str, where: str) -> OpenChoice:
        box = QMessageBox(self.window)
        box.setIcon(QMessageBox.Icon.Information)
        box.setWindowTitle("Document already open")
        box.setText(f"“{name}” is already open in {where}.")
        box.setInformativeText(
            "Editing it in two places would let one save silently replace the other's words. "
            "Switch to that window, or open a read-only view here."
        )
        switch = box.addButton("Switch to it", QMessageBox.ButtonRole.AcceptRole)
        read_only = box.addButton("Open read-only", QMessageBox.ButtonRole.ActionRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(switch)
        box.exec()
        clicked = box.clickedButton()
        return "switch" if clicked is switch else "read-only" if clicked is read_only else "cancel"

    def _update_title(self, *_: object) -> None:
        suffix = " (read-only)" if getattr(self, "read_only", False) else ""
        self.window.setWindowTitle(f"{self.display_name}{suffix}[*] — Letterpress")
        self.window.setWindowModified(self.is_modified())

    def start_folder(self) -> Path:
        """Where Open and Save As start: the current file's folder, else the folder last opened from or saved
        to (the newest recent file's: remembered across restarts), else the documents folder. Never the
        working directory the app happened to be started in."""
        if self.path is not None:
            return self.path.parent
        for recent in self.recent.load():
            if recent.parent.is_dir():
                return recent.parent
        from app.platform.folders import documents_dir

        return documents_dir()

    def _open_dialog(self) -> str:
        start = str(self.start_folder())
        return QFileDialog.getOpenFileName(self.window, "Open document", start, FILE_FILTER)[0]

    def _save_dialog(self, suggested: str) -> str:
        # The dialog's own overwrite check would look at the name before ".md" is added; `save_as` asks about
        # the final name instead, so the dialog must not ask a second, different question.
        dialog = QFileDialog(self.window, "Save document as", suggested, FILE_FILTER)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setDefaultSuffix("md")
        dialog.setOption(QFileDialog.Option.DontConfirmOverwrite, True)
        if dialog.exec() != QFileDialog.DialogCode.Accepted or not dialog.selectedFiles():
            return ""
        return dialog.selectedFiles()[0]

    def _ask_replace_box(self, target: Path) -> bool:
        answer = QMessageBox.question(
            self.window,
            "Replace file?",
            f"“{target.name}” already exists in {target.parent}.\nDo "
            "you want to replace it with this document?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Cancel,
        )
        return answer == QMessageBox.StandardButton.Yes

    def _install_actions(self, menu: QMenu | None) -> None:
        """File ▸ New, Open, Open Recent, Save, Save As and (when the window has none) Quit, each at the place
        the command table gives it in the File menu."""
        if menu is None:
            menu = actions.window_menu(self.window, "menuFile")
        self.menu = menu
        existing_quit = next((a for a in menu.actions() if a.objectName() == "actionQuit"), None)

        def make(name: str, slot: Callable[[], object]) -> QAction:
            action = actions.configure(QAction(self.window), name)  # label and keys from the command table
            action.triggered.connect(lambda *_: slot())
            menu.addAction(action)
            return action

        self.action_new = make("actionNew", self.new)
        self.action_open = make("actionOpen", self.open)
        self.recent_menu = QMenu(MENU_BY_ID["menuRecent"].title, self.window)
        self.recent_menu.setObjectName("menuRecent")
        menu.addMenu(self.recent_menu)
        self.action_save = make("actionSave", self.save)
        self.action_save_as = make("actionSaveAs", self.save_as)
        if existing_quit is not None:
            self.action_quit = existing_quit
        else:
            self.action_quit = make("actionQuit", self.quit)
        actions.arrange(menu)
        self._rebuild_recent_menu()

    def _rebuild_recent_menu(self) -> None:
        self.recent_menu.clear()
        items = self.recent.load()
        for p in items:
            action = self.recent_menu.addAction(p.name)
            action.setToolTip(str(p))
            action.setStatusTip(str(p))
            action.triggered.connect(lambda *_, p=p: self.open(p))
        if items:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear list", self._clear_recent)
        self.recent_menu.setEnabled(bool(items))

    def _clear_recent(self) -> None:
        self.recent.clear()
        self._rebuild_recent_menu()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt name)
        """Ask about unsaved work before the window closes; cancelling keeps the window open."""
        if watched is self.window and event.type() == QEvent.Type.Close and not self._close_guard():
            assert isinstance(event, QCloseEvent)
            event.ignore()
            return True
        return False
