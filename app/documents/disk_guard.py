"""Changes made on disk by other programs to the document a window edits: what the file was when it was last
read or written (`disk`), what came of each change (`DocumentController.externalChange`), and the questions:
an unmodified document follows the disk; otherwise the writer is asked (reload, keep, compare), a save over a
changed file asks first, and a version already answered is not asked about again on every folder event.
The comparison and the watcher are `app.documents.external_change`'s; this is what the File menu does with
them. Built by `DocumentController`, which asks its questions (`ask_external_change`, `show_compare`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QPlainTextEdit

from app.documents.external_change import DiskState, ExternalChangeWatcher, Resolution, compare, disk_state
from app.documents.file_formats import DocumentError, read_text_file

# a file rewritten faster than the writer can answer: give up (cancel) after this many questions
MAX_REASKS = 20


class GuardedDocument(Protocol):
    """What the guard reads of the document controller, and the questions it asks through it."""

    @property
    def path(self) -> Path | None: ...
    @property
    def editor(self) -> QPlainTextEdit: ...
    @property
    def display_name(self) -> str: ...
    @property
    def message(self) -> Any: ...  # Signal(str)
    @property
    def externalChange(self) -> Any: ...  # noqa: N802 - the controller's signal: Signal(str)
    @property
    def keep_copy(self) -> Callable[[str, str | None], Path] | None: ...
    @property
    def ask_external_change(self) -> Callable[[str, bool], Resolution]: ...
    @property
    def show_compare(self) -> Callable[[str, str, str], Resolution]: ...
    @property
    def show_error(self) -> Callable[[str, str], object]: ...

    def text(self) -> str: ...
    def is_modified(self) -> bool: ...
    def reload(self) -> bool: ...


class DiskGuard(QObject):
    def __init__(self, docs: GuardedDocument, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.docs = docs
        self.disk: DiskState | None = None  # the file as last read or written (None: no file)
        self.resolving = False
        self.deleted_reported = False
        # The disk version the writer was last told about without adopting it (cancelled, or not reloadable):
        # the watcher fires for every new file in the folder and must not ask about it again each time.
        self.answered: DiskState | None = None
        self.watcher = ExternalChangeWatcher(self)
        self.watcher.noticed.connect(self.on_change)

    def follow(self, path: Path | None) -> None:
        """`path` is now the document's file as the editor holds it (just read or written): watch it."""
        self.disk = disk_state(path) if path is not None else None
        self.deleted_reported = False
        self.answered = None
        self.watcher.watch(path)

    def check_recovered(self, path: Path, saved_at: float) -> None:
        """Recovered text, copied at `saved_at`, is now the document: a file changed on disk after that
        (another program, after the crash) is treated as an external change, so the next save asks first."""
        if self.disk is None:
            return
        with contextlib.suppress(OSError):
            if path.stat().st_mtime > saved_at:
                self.disk = DiskState(-1, -1, "")  # matches no file: saving asks (reload, keep, compare)
                when = datetime.fromtimestamp(saved_at).strftime("%Y-%m-%d %H:%M")
                self.docs.message.emit(
                    f"{path.name} was changed on disk after this copy was made ({when}); saving "
                    "asks first, and Compare shows both versions."
                )

    def keep_unsaved(self) -> bool:
        """Before a reload replaces unsaved edits: keep them as a recovery copy (offered at the next start).
        False, said in a box, when that copy cannot be written: then nothing may be reloaded."""
        docs = self.docs
        if docs.keep_copy is None:
            docs.show_error(
                "Not reloaded",
                "There is no recovery folder to keep your unsaved version in, "
                "so nothing was reloaded. Use Save As to keep your version.",
            )
            return False
        try:
            copy = docs.keep_copy(docs.text(), str(docs.path))
        except OSError as exc:
            docs.show_error(
                "Not reloaded",
                f"Your unsaved version could not be kept as a recovery copy "
                f"({exc.strerror or exc}), so nothing was reloaded. Use Save As to keep it.",
            )
            return False
        docs.message.emit(
            f"Your unsaved version of {docs.display_name} was kept as a recovery copy "
            f"({copy}); Letterpress offers it at the next start."
        )
        return True

    def allows_save(self, target: Path) -> bool:
        """Whether saving over `target` replaces nothing the writer has not seen (asked when it would)."""
        verdict, now = compare(target, self.disk)
        if verdict == "same":
            return True
        if verdict == "deleted":
            self.docs.message.emit(f"{target.name} had been deleted or moved on disk; saving recreated it.")
            return True
        if verdict == "unreadable":
            text = (
                f"{target.name} can no longer be read (its permissions changed, or something that is not "
                "a "
                "file took its place), so Letterpress cannot check whether another program changed it; "
                "nothing was saved. Your text is still here: use Save As to save it elsewhere."
            )
            self.docs.show_error("Document not saved", text)
            self.docs.message.emit(text)
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
            self.docs.message.emit(
                f"{target.name} changed on disk again while you were deciding; asking again."
            )
        else:
            choice = "cancel"
        self.docs.externalChange.emit({"keep": "kept", "reload": "reloaded"}.get(choice, "cancelled"))
        if choice == "keep":
            return True
        if choice == "reload":
            self.docs.reload()
        return False

    @staticmethod
    def _changed_since(target: Path, seen: DiskState | None) -> bool:
        """Whether the file is no longer the version `seen` (content, not time), e.g. while a question
        was open."""
        return compare(target, seen)[0] != "same"

    def _resolve(self, *, saving: bool) -> Resolution:
        choice = self.docs.ask_external_change(self.docs.display_name, saving)
        if choice == "compare":
            try:
                theirs = read_text_file(self.docs.path).text if self.docs.path else ""
            except DocumentError as exc:
                theirs = f"(the file on disk cannot be read: {exc.message})"
            choice = self.docs.show_compare(self.docs.display_name, self.docs.text(), theirs)
        return choice if choice in ("reload", "keep") else "cancel"

    def on_change(self) -> None:
        """Look at the file on disk now (what the watcher triggers, and `check_disk`)."""
        if self.resolving or self.docs.path is None:
            return
        verdict, now = compare(self.docs.path, self.disk, quick=True)
        if verdict == "same":
            if now is not None:
                self.disk = now
            return
        self.resolving = True
        try:
            if verdict == "unreadable":
                if self.answered is None or self.answered.digest != "unreadable":
                    self.answered = now
                    self.docs.message.emit(
                        f"{self.docs.display_name} can no longer be read (permission denied, or it "
                        "is no "
                        "longer a file). Your text is still here; Save As saves it elsewhere."
                    )
                    self.docs.externalChange.emit("unreadable")
                return
            if verdict == "deleted":
                if not self.deleted_reported:
                    self.deleted_reported = True
                    self.docs.editor.document().setModified(True)  # closing now asks; Save recreates the file
                    self.docs.message.emit(
                        f"{self.docs.display_name} was deleted or moved on disk. Your text is still "
                        "here: Save recreates the file."
                    )
                    self.docs.externalChange.emit("deleted")
                return
            self.deleted_reported = False
            seen = self.answered
            if now is not None and seen is not None and (seen.size, seen.digest) == (now.size, now.digest):
                return  # already asked (or reported) about exactly this version; Save still asks again
            if not self.docs.is_modified():  # nothing of the writer's can be lost: follow the disk
                if self.docs.reload():
                    self.docs.message.emit(
                        f"{self.docs.display_name} was changed by another program and reloaded."
                    )
                    self.docs.externalChange.emit("reloaded")
                else:
                    self.answered = now
                return
            choice = self._resolve(saving=False)
            if choice == "reload":
                if not self.docs.reload():
                    self.answered = now
            elif choice == "cancel":
                self.answered = now
            elif choice == "keep":
                self.disk = now  # the writer chose their version over this one: the next save replaces it
                self.docs.message.emit(
                    f"Keeping your version of {self.docs.display_name}; saving replaces the one on disk."
                )
                if self.docs.path is not None and self._changed_since(self.docs.path, now):
                    # It changed again while the question was open: that newer version was never shown, so
                    # the question comes again (and a save asks in any case, its hash differs from `now`).
                    QTimer.singleShot(0, self.on_change)
            self.docs.externalChange.emit({"keep": "kept", "reload": "reloaded"}.get(choice, "cancelled"))
        finally:
            self.resolving = False
