"""The File menu of a window: New, Open, Open Recent, Save, Save As, Reload and Quit; no word ever lost.

`DocumentController` keeps the current document's path, encoding and endings, the title's modified marker,
the lock of one file, one editor, and asks before unsaved work is closed. What a file is on disk lives in
`app.documents.file_formats` (plain Python, `DocumentError` with a message a writer can act on), the recent
list in `app.documents.recent`, the questions in `app.documents.dialogs`; the controller holds the questions
as attributes (`ask_unsaved`, `choose_open_path`, `choose_save_path`, `ask_replace`, `ask_already_open`,
`ask_external_change`, `show_compare`, `show_error`) so tests answer them instead of clicking modal boxes.

What a save and an open guard against, and where it lives: exact bytes and per-line endings
(`app.documents.line_endings`), links and file modes (`write_text_file`, `app.platform.atomic`), changes made
on disk by other programs (`app.documents.external_change`; what the File menu does about them:
`app.documents.disk_guard`), one file, one editor (`app.documents.one_editor`,
`app.platform.locks`), temporary files of an interrupted save (`save_journal`, kept by
`app.documents.recovery`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent
from PySide6.QtWidgets import QMainWindow, QMenu, QMessageBox, QPlainTextEdit

from app.config.commands import MENU_BY_ID
from app.documents import dialogs
from app.documents.dialogs import FILE_FILTER, Choice, OpenChoice
from app.documents.disk_guard import DiskGuard
from app.documents.external_change import Resolution
from app.documents.file_formats import (
    MAX_BYTES,
    DocumentError,
    TextFile,
    decode_text,
    encode_text,
    final_save_path,
    is_read_only,
    not_a_document,
    read_text_file,
    same_file,
    write_text_file,
)
from app.documents.line_endings import normalise
from app.documents.one_editor import EditorClaim, Elsewhere
from app.documents.recent import RecentFiles, RecentMenu, start_folder
from app.documents.window_switch import raise_window
from app.platform.locks import FileLock
from app.platform.privacy import note_document
from app.ui import actions
from app.ui.display_breaks import add_breaks, real_text

log = logging.getLogger(__name__)


class SaveJournal(Protocol):
    """Where a save notes its temporary files before writing them (see `RecoveryManager.note_temp`)."""

    def note_temp(self, temp: Path, target: Path) -> None: ...

    def temps_done(self) -> None: ...


def editor_text(editor: QPlainTextEdit) -> str:
    """The document exactly as typed: unlike toPlainText, this keeps no-break spaces and line separators,
    and a display break in an over-long line is the space it stands for (`app.ui.display_breaks`)."""
    return real_text(editor.document())


# ------------------------------------------------------------------------------------------------------------
# The File menu


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
        self.claim = EditorClaim(
            lock_folder or recent_path.parent / "recovery" / "locks", partial(raise_window, window)
        )
        self.read_only = False
        self.save_journal: SaveJournal | None = None  # the recovery manager: notes temp files of each save
        self.keep_copy: Callable[[str, str | None], Path] | None = None  # recovery copy before a reload
        self.ask_already_open: Callable[[str, str], OpenChoice] = partial(dialogs.ask_already_open, window)
        # A change made on disk by another program (app.documents.external_change): asked, compared, never
        # overwritten.
        self.ask_external_change: Callable[[str, bool], Resolution] = partial(
            dialogs.ask_external_change, window
        )
        self.show_compare: Callable[[str, str, str], Resolution] = partial(dialogs.show_compare, window)
        self._loaded: str | None = None  # the editor's text right after the file was loaded or saved
        self.disk = DiskGuard(self, self)  # changes made on disk by other programs (app.documents.disk_guard)
        self.ask_unsaved: Callable[[str], Choice] = partial(dialogs.ask_unsaved, window)
        self.choose_open_path: Callable[[], str] = lambda: dialogs.choose_open_path(
            window, self.start_folder()
        )
        self.choose_save_path: Callable[[str], str] = partial(dialogs.choose_save_path, window)
        self.ask_replace: Callable[[Path], bool] = partial(dialogs.ask_replace, window)
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
                self.recent_menu.rebuild()
            return False
        lock: FileLock | None = None
        if not read_only:  # another window edits it: switch there, or open it read-only here
            opened_as = self.claim.claim_to_open(p, self.ask_already_open, self.show_error)
            if opened_as is None:
                return False
            lock, read_only = opened_as
        if not self.maybe_save():
            if lock is not None and lock is not self.claim.lock:
                lock.release()
            return False
        self.claim.adopt(lock, p)
        self._set_text(doc.text, p, doc.encoding, doc.newline, doc.raw)
        self._set_read_only(read_only)
        self.recent.add(p)
        self.recent_menu.rebuild()
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
        if p is not None and saved_at is not None:
            self.disk.check_recovered(p, saved_at)

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
        own = same_file(target, self.path) and not self.read_only
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
        same = self.path is not None and (target == self.path or same_file(target, self.path))
        if same and not self.disk.allows_save(target):
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
        if self.claim.holds(target):
            self.claim.refresh(target)  # a replaced file has a new inode: its lock follows it
        self.disk.follow(target)
        self.editor.document().setModified(False)
        self.recent.add(target)
        self.recent_menu.rebuild()
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
        self.disk.follow(path)
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
        if had_edits and not self.disk.keep_unsaved():
            return False
        read_only = self.read_only
        self._set_text(doc.text, self.path, doc.encoding, doc.newline, doc.raw)
        self._set_read_only(read_only)
        if had_edits:
            self.discarded.emit()
        return True

    def check_disk(self) -> None:
        """Look at the file on disk now (what the watcher triggers)."""
        self.disk.on_change()

    def _set_read_only(self, read_only: bool) -> None:
        self.read_only = read_only
        self.editor.setReadOnly(read_only)
        self._update_title()

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

    def _update_title(self, *_: object) -> None:
        suffix = " (read-only)" if getattr(self, "read_only", False) else ""
        self.window.setWindowTitle(f"{self.display_name}{suffix}[*] — Letterpress")
        self.window.setWindowModified(self.is_modified())

    def start_folder(self) -> Path:
        """Where Open and Save As start (`app.documents.recent.start_folder`)."""
        return start_folder(self.path, self.recent)

    def _install_actions(self, menu: QMenu | None) -> None:
        """File ▸ New, Open, Open Recent, Save, Save As and (when the window has none) Quit, each at the place
        the command table gives it in the File menu."""
        if menu is None:
            menu = actions.window_menu(self.window, "menuFile")
        self.menu = menu
        existing_quit = next((a for a in menu.actions() if a.objectName() == "actionQuit"), None)

        def make(name: str, slot: Callable[[], object]) -> QAction:
            action = actions.create(self.window, name, slot)  # label and keys from the command table
            menu.addAction(action)
            return action

        self.action_new = make("actionNew", self.new)
        self.action_open = make("actionOpen", self.open)
        self.recent_menu = RecentMenu(MENU_BY_ID["menuRecent"].title, self.window, self.recent, self.open)
        menu.addMenu(self.recent_menu)
        self.action_save = make("actionSave", self.save)
        self.action_save_as = make("actionSaveAs", self.save_as)
        if existing_quit is not None:
            self.action_quit = existing_quit
        else:
            self.action_quit = make("actionQuit", self.quit)
        actions.arrange(menu)
        self.recent_menu.rebuild()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt name)
        """Ask about unsaved work before the window closes; cancelling keeps the window open."""
        if watched is self.window and event.type() == QEvent.Type.Close and not self._close_guard():
            assert isinstance(event, QCloseEvent)
            event.ignore()
            return True
        return False


# What other modules and scripts imported from here before the file formats, recent files and dialogs had
# rooms of their own.
__all__ = [
    "FILE_FILTER",
    "MAX_BYTES",
    "Choice",
    "DocumentController",
    "DocumentError",
    "OpenChoice",
    "RecentFiles",
    "SaveJournal",
    "TextFile",
    "decode_text",
    "editor_text",
    "encode_text",
    "final_save_path",
    "is_read_only",
    "not_a_document",
    "read_text_file",
    "write_text_file",
]
