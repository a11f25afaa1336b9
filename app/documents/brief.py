"""The document brief: a short per-document note (style, audience, names, facts to respect) that every
assistant request for that document carries in its prompt.

It is edited from `Assist ▸ Document brief…` and never written into the document itself: it lives beside the
recovery data, in `<data>/briefs/<key>.json`, one file per document, written atomically the moment the dialog
is accepted. The key is the one recovery uses to tell documents apart: a saved document's path (hashed into a
file name), or for an untitled document the window's recovery session (the stem of its autosave file), so a
brief comes back after a restart with the file it belongs to, or with the recovered copy of an untitled
document. Saving an untitled document under a name carries its brief along; discarding it drops the brief.
Saving any document under a new name writes that name's brief anew (the document's own, or none), so a file
saved over one that once had another document's brief never gets that brief back after a restart.

The loaded model limits a brief (`ModelInfo.brief_chars`: a quarter of what it reads beside a request; the
demo reads 512 tokens, where a 1,500-character brief left no room for the text and every request failed). The
dialog names that limit and refuses a longer brief; a brief saved for a larger model is kept whole, its
requests carry the part this model reads, and the window says so in one sentence. The status bar's
`briefStatus` button shows that the document has a brief (its start in the tooltip) and opens it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QMainWindow,
    QPlainTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.platform.atomic import atomic_write_bytes
from app.platform.locks import is_locked
from engine.api import ModelInfo

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MAX_CHARS = 4000  # a brief is a note, not a second document: it takes prompt room from the document itself
UNTITLED = "untitled-"


def path_key(path: str | Path) -> str:
    """The store key of a saved document: its resolved path, hashed (file names cannot hold every path)."""
    resolved = str(Path(path).expanduser().resolve())
    # os.fsencode: the file system's own bytes, so a name that is not valid UTF-8 has a key too (it had none).
    return "path-" + hashlib.sha256(os.fsencode(resolved)).hexdigest()[:32]


def clip_at_word(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, at the last space when there is one in its second half."""
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit)]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip()


def short_line(text: str, limit: int) -> str:
    """One line of at most `limit` characters ending at a word with "…" (the whole text when it fits)."""
    from app.platform.text_fit import shorten_words

    return shorten_words(text, limit)


def untitled_key(session: str) -> str:
    """The store key of an untitled document: the recovery session (autosave file stem) of its window."""
    return UNTITLED + session


MAX_FILE_BYTES = 1024**2  # a brief file holds at most MAX_CHARS characters; anything far larger is not one


class BriefStore:
    """One small JSON file per document brief. A file that cannot be read as a brief is never taken for "no
    brief" silently: it is moved aside as `<key>.json.broken[-N]` (so the next brief cannot overwrite it) and
    `problem` says so, with whatever text of it could still be read offered as the brief."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.problem = ""  # about the last `load`: "" when it was fine (or there was no brief)

    def file(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def load(self, key: str) -> str:
        from app.platform.keep_beside import keep_beside, regular_size

        self.problem = ""
        file = self.file(key)
        size = regular_size(file)
        if size is None:
            if os.path.lexists(file):
                self.problem = (
                    f"The brief of this document ({file}) is not a regular file, so it was not "
                    "read; "
                    "it is left as it is. A new brief is saved once it is replaced by a file."
                )
            return ""
        raw = b""
        try:
            if size > MAX_FILE_BYTES:
                raise ValueError(f"{size:,} bytes, far more than a brief")
            raw = file.read_bytes()
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("brief", ""), str):
                raise ValueError("not a brief record")
            return str(data.get("brief", ""))
        except FileNotFoundError:
            return ""
        except (OSError, ValueError, RecursionError) as exc:
            log.warning("damaged brief %s: %s", file.name, type(exc).__name__)
            salvaged = _salvage(raw)
            try:
                kept = keep_beside(file, raw if raw else None, move=True)
                where = f"it was kept as {kept}"
            except OSError:
                where = "it could not be moved aside, so it is left as it is"
            self.problem = f"The brief of this document was damaged and could not be read; {where}. " + (
                "What could be read of it is shown in Assist ▸ Document brief…; accept it to save it again."
                if salvaged
                else "Write the brief again in Assist ▸ Document brief…."
            )
            return salvaged

    def save(self, key: str, text: str, path: str | None = None) -> bool:
        """Write (or, for an empty brief, remove) the brief; False when the disk refused (the caller says
        so)."""
        if not text.strip():
            self.remove(key)
            return True
        record = {
            "version": FORMAT_VERSION,
            "path": path,
            "saved_at": time.time(),
            "pid": os.getpid(),
            "brief": text,
        }
        try:
            body = json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8")
        except UnicodeEncodeError:  # a path that is not valid UTF-8: JSON escapes read back to the same name
            body = json.dumps(record, ensure_ascii=True, indent=1).encode("ascii")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.file(key), body)
        except OSError as exc:
            log.warning("could not save the document brief: %s", exc.strerror or exc)
            return False
        return True

    def remove(self, key: str) -> None:
        with contextlib.suppress(OSError):
            self.file(key).unlink()

    def forget_orphans(self, recovery_folder: Path, keep: str) -> None:
        """Untitled briefs whose recovery copy is gone belong to nothing any more (their window quit cleanly
        or the copy was discarded): remove them, except `keep` (this window's)."""
        if not self.folder.is_dir():
            return
        for file in self.folder.glob(f"{UNTITLED}*.json"):
            session = file.stem[len(UNTITLED) :]
            if file.stem == keep or (recovery_folder / f"{session}.json").exists():
                continue
            if session_alive(recovery_folder, session):  # its window runs (maybe in another PID namespace)
                continue
            try:
                pid = int(json.loads(file.read_text(encoding="utf-8")).get("pid", 0))
            except (OSError, ValueError, AttributeError, TypeError):
                pid = 0
            if not _alive(pid):  # a window still running may not have autosaved its untitled text yet
                with contextlib.suppress(OSError):
                    file.unlink()


def _salvage(raw: bytes) -> str:
    """The readable part of a damaged brief record's "brief" text ('' when none)."""
    from app.documents.recovery import _salvage_text

    body = raw.decode("utf-8", errors="replace")
    found = _salvage_text(body.replace('"brief"', '"text"', 1)) if '"brief"' in body else None
    return (found or "")[:MAX_CHARS]


def session_alive(recovery_folder: Path, session: str) -> bool:
    """The recovery session's lock is held (app.documents.recovery): true wherever its PID is not visible or
    reused."""
    return is_locked(recovery_folder / f"{session}.lock")


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # no permission to signal it: it exists
        return True
    return True


class BriefController(QObject):
    """The current document's brief: follows the document controller (open, new, save as, discard,
    restore)."""

    changed = Signal(str)  # the brief text
    limitChanged = Signal()  # the loaded model changed how much of a brief it reads
    # a damaged brief file was found (and kept aside): what happened; "" when all is well
    problem = Signal(str)
    saved_brief = Signal()  # the writer's brief was written to disk

    def __init__(
        self, store: BriefStore, session: str, documents: QObject | None = None, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.session = session
        self.path: str | None = None
        self._text = ""
        self._save_as_target: str | None = None
        self.limit = MAX_CHARS  # the most characters the loaded model reads (MAX_CHARS with no model)
        self.model_name = ""  # the loaded model, as the writer knows it ("Built-in demo")
        self.dialog: QDialog | None = None  # the brief's dialog, once opened
        if documents is not None:
            self.connect_document(documents)

    # -- what the assistant and the dialog use ---------------------------------------------------------------

    @property
    def text(self) -> str:
        return self._text

    @property
    def key(self) -> str:
        return path_key(self.path) if self.path else untitled_key(self.session)

    @property
    def over_limit(self) -> bool:
        """The brief is longer than the loaded model reads (requests carry its first `limit` characters)."""
        return len(self._text) > self.limit

    @property
    def request_text(self) -> str:
        """What requests carry: the brief, or, when it is longer than the model reads, its first `limit`
        characters ending at a word (a request that cannot fit its brief would fail every time)."""
        return clip_at_word(self._text, self.limit)

    def set_model(self, limit: int, name: str) -> None:
        """The loaded model reads at most `limit` characters of a brief (0: not known, the app's own cap)."""
        limit = min(MAX_CHARS, limit) if limit > 0 else MAX_CHARS
        if (limit, name) != (self.limit, self.model_name):
            self.limit, self.model_name = limit, name
            self.limitChanged.emit()

    def over_limit_sentence(self) -> str:
        """One sentence for a brief longer than the model reads ("" when it is not)."""
        if not self.over_limit:
            return ""
        model = self.model_name or "The loaded model"
        return (
            f"This document's brief has {len(self._text):,} characters and {model} reads "
            f"{self.limit:,} of them "
            "beside your text, so requests carry its first part (Assist ▸ Document brief… shortens it)."
        )

    def document_id(self) -> str:
        """Which document requests come from (the engine keeps a few encoder caches per document)."""
        return self.key

    def set_text(self, text: str) -> bool:
        """The writer's new brief: kept at once, on disk too. False when it could not be written."""
        text = text.strip()[:MAX_CHARS]
        self._text = text
        ok = self.store.save(self.key, text, self.path)
        self.changed.emit(text)
        if ok:
            self.saved_brief.emit()
        return ok

    # -- following the document ------------------------------------------------------------------------------

    def connect_document(self, documents: QObject) -> None:
        documents.saved.connect(self._on_saved)  # type: ignore[attr-defined]
        documents.pathChanged.connect(self._on_path_changed)  # type: ignore[attr-defined]
        documents.discarded.connect(self._on_discarded)  # type: ignore[attr-defined]
        path = getattr(documents, "path", None)
        self._switch(str(path) if path else None)

    def adopt_recovered(self, recovered_file: Path, path: str | None) -> None:
        """A recovered copy was restored: an untitled one brings the brief its old window kept."""
        if path:
            return  # keyed by the path: `_on_path_changed` already loaded it
        old = untitled_key(recovered_file.stem)
        text = self.store.load(old)
        if text:
            self._text = text
            self.store.save(self.key, text, None)
            self.store.remove(old)
            self.changed.emit(text)

    def _on_saved(self, path: str) -> None:
        if not self.path or path_key(path) != self.key:
            self._save_as_target = path  # the path change that follows is "save as": the brief goes along

    def _on_path_changed(self, path: str) -> None:
        target, self._save_as_target = self._save_as_target, None
        if path and target is not None and path_key(path) == path_key(target):
            old = self.key
            self.path = path
            # The new name gets this document's brief, or none: a brief left there by another document that
            # once had this name must not come back with it (an empty brief removes the file).
            self.store.save(self.key, self._text, path)
            if old.startswith(UNTITLED):
                self.store.remove(old)
            return
        self._switch(path or None)

    def _on_discarded(self) -> None:
        if self.path is None:
            self.store.remove(self.key)

    def _switch(self, path: str | None) -> None:
        self.path = path
        if path is None:  # a new untitled document starts without a brief
            self.store.remove(self.key)
            self._text = ""
        else:
            self._text = self.store.load(self.key)
        self.problem.emit(self.store.problem if path is not None else "")  # "" clears an earlier one
        self.changed.emit(self._text)


class BriefDialog(QDialog):
    """A small editor for the current document's brief."""

    def __init__(self, controller: BriefController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.setObjectName("briefDialog")
        self.setWindowTitle("Document brief")
        layout = QVBoxLayout(self)
        intro = QLabel(
            "A note the assistant reads with every request for this document: style, audience, names, facts "
            "to respect. It is kept beside the document, not written into it."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.edit = QPlainTextEdit(self)
        self.edit.setObjectName("briefEdit")
        self.edit.setPlaceholderText(
            "e.g. British spelling; for a general audience; the ship is the Maud; the story is set in 1923."
        )
        self.edit.setPlainText(controller.text)
        layout.addWidget(self.edit)
        self.count = QLabel(self)
        self.count.setObjectName("briefCount")
        layout.addWidget(self.count)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, parent=self
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.edit.textChanged.connect(self._count)
        self._count()
        self.resize(480, 280)

    def _count(self) -> None:
        n = len(self.edit.toPlainText().strip())
        limit = self.controller.limit
        model = self.controller.model_name
        of = f"{n:,} of {limit:,} characters" + (f" ({model} reads at most {limit:,})" if model else "")
        if n > limit:
            self.count.setText(f"{of}: shorten it by {n - limit:,} to save it.")
            self.count.setStyleSheet("color: #b3261e;")
        else:
            self.count.setText(f"{of}.")
            self.count.setStyleSheet("")

    def accept(self) -> None:
        text = self.edit.toPlainText().strip()
        if len(text) > self.controller.limit:  # refused before saving: the count says by how much
            self._count()
            self.edit.setFocus()
            return
        if not self.controller.set_text(text):
            show = getattr(self.parent(), "show_message", None)
            if callable(show):
                show("The document brief could not be saved to disk; it is used until Letterpress quits.")
        super().accept()


class BriefUser(Protocol):
    """Who carries the brief into requests (app.assist.controller.RequestDefaults; documents and assist
    are siblings, so it is named by what it does)."""

    def use_brief(self, source: BriefController) -> None: ...


def install_brief(
    window: QMainWindow,
    documents: QObject,
    recovery_folder: Path,
    session: str,
    defaults: BriefUser | None = None,
) -> BriefController:
    """The brief for `window`'s document: `Assist ▸ Document brief…`, storage beside `recovery_folder`, and
    every assistant request carrying it (through the assistant's `defaults`)."""
    store = BriefStore(recovery_folder.parent / "briefs")
    store.forget_orphans(recovery_folder, keep=untitled_key(session))
    controller = BriefController(store, session, parent=window)
    # A damaged brief stays said in the status bar (objectName `briefWarning`) until a brief is saved or
    # another document is opened: a passing message would be replaced by "Opened ..." at once.
    warning = QLabel(window)
    warning.setObjectName("briefWarning")
    warning.setStyleSheet("QLabel { color: #b00020; }")
    warning.setWordWrap(False)
    warning.hide()
    window.statusBar().addPermanentWidget(warning)

    def on_problem(text: str) -> None:
        if not text:
            warning.hide()
            return
        warning.setText("⚠ " + short_line(text, 140))  # at a word, never mid-word; the whole in the tooltip
        warning.setToolTip(text)
        warning.show()

    controller.problem.connect(on_problem)
    controller.saved_brief.connect(warning.hide)
    sign = _install_brief_sign(window, controller)
    controller.connect_document(documents)
    from app.ui.actions import add_window_action, create

    def open_dialog() -> None:
        dialog = BriefDialog(controller, window)
        controller.dialog = dialog
        dialog.open()

    action = create(window, "actionDocumentBrief", open_dialog)
    sign.clicked.connect(lambda *_: open_dialog())
    add_window_action(window, action, title="&Assist")
    _follow_model(window, controller)
    if defaults is not None:
        defaults.use_brief(controller)
    return controller


def _install_brief_sign(window: QMainWindow, controller: BriefController) -> QToolButton:
    """The status bar's sign that this document has a brief (objectName `briefStatus`): "Brief", its start in
    the tooltip, a click opens it; "Brief ⚠" when the loaded model reads only part of it."""
    sign = QToolButton(window)
    sign.setObjectName("briefStatus")
    sign.setAutoRaise(True)
    sign.hide()

    def update(*_: object) -> None:
        text = controller.text
        sign.setVisible(bool(text))
        if not text:
            return
        over = controller.over_limit_sentence()
        sign.setText("Brief ⚠" if over else "Brief")
        sign.setStyleSheet("QToolButton { color: #b00020; }" if over else "")
        sign.setToolTip(
            f"This document has a brief ({len(text):,} characters) that every request carries: "
            f"“{short_line(text, 160)}”" + (f"\n{over}" if over else "") + "\nClick to edit it."
        )

    controller.changed.connect(update)
    controller.limitChanged.connect(update)
    window.statusBar().addPermanentWidget(sign)
    return sign


def _follow_model(window: QMainWindow, controller: BriefController) -> None:
    """Each loaded model sets how much of a brief it reads; a brief longer than that is said once per model
    (or per brief) in the window's note above the page, never as failed requests."""
    host = getattr(window, "host", None)
    said: list[str] = []

    def say() -> None:
        sentence = controller.over_limit_sentence()
        notice = getattr(window, "modelNotice", None)
        if not sentence and notice is not None:
            notice.clear("brief")  # the brief fits (shortened, another document, a larger model)
        if sentence and sentence not in said:
            said.append(sentence)
            if notice is not None:
                notice.show_text(sentence, topic="brief")
            else:
                show = getattr(window, "show_message", None)
                if callable(show):
                    show(sentence)

    def on_loaded(info: ModelInfo) -> None:
        from app.ui.demo_notice import demo_wording, is_demo_model

        name = demo_wording().name if is_demo_model(info.path) else info.name
        controller.set_model(int(getattr(info, "brief_chars", 0) or 0), name)

    if host is not None and hasattr(host, "loaded"):
        host.loaded.connect(on_loaded)
        if getattr(host, "model_info", None) is not None:
            on_loaded(host.model_info)
    controller.changed.connect(lambda *_: say())
    controller.limitChanged.connect(say)
