"""Autosave and crash recovery: unsaved text is copied to the recovery folder every few seconds.

Layout of the recovery folder (`app.config.settings.recovery_dir()`), all written atomically:

- `<session>.json`  one per running window: {"version", "pid", "path" (or null: untitled), "saved_at", "text",
  optional "kind": "autosave" | "kept before reload" | "interrupted save"}. A clean save, a discard or a clean
  quit removes it.
- `<session>.lock`  held (flock / msvcrt) by that window's process for as long as it runs. A copy belongs to a
  dead session exactly when its lock is free: the kernel releases it when the process dies however it dies, so
  this works in PID namespaces (containers, sandboxes) and after a reboot, where a PID says nothing. A copy
  without a lock file (kept copies, older versions) is a leftover too.
- `<session>.saving.json`  the temporary files a save of that session is writing right now ({"temps":
  [{"temp", "target"}]}); at the next start, leftovers of a session whose lock is free are removed, or offered
  as recovery when they hold text the document on disk does not. Temps no journal knows (`.<name>.<8>.lptmp`
  or `.lpbackup` beside a document, older than two minutes) are handled the same way when that document is
  opened;
  the `.tmp`/`.backup` names older versions used (and other programs use too) are only removed when they hold
  exactly the document's bytes, otherwise their text is offered and the file is left where it is.
- `locks/<hash>.lock`  one file, one editor: see `app.platform.locks.document_lock_path`.

Anything else a module adds beside a session's files must be named `<session>.<something>` and removed with
it. At the next start, copies of dead sessions are offered: the window restores each one, showing which
document it belongs to and when it was autosaved.

Snapshots are taken on the UI thread (a string copy) and written on one background thread, in order, so a
large document never stalls typing; writes are atomic, so a kill in the middle leaves the previous copy. A
write that fails is reported through `statusChanged` until one succeeds again (the window shows it in its
status bar).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import stat
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from app.config.settings import Settings
from app.platform.atomic import atomic_write_bytes
from app.platform.locks import FileLock, holder_info, is_locked
from app.platform.privacy import note_document

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
IDLE_MS = 300  # autosave this long after the writer stops typing
Answer = Literal["restore", "discard", "later"]


@dataclass(frozen=True)
class RecoveredDocument:
    """An autosaved copy left behind by a process that did not finish cleanly."""

    file: Path
    text: str
    path: str | None
    saved_at: float
    pid: int
    kind: str = "autosave"

    @property
    def name(self) -> str:
        return Path(self.path).name if self.path else "Untitled"

    def describe(self) -> str:
        try:
            when = datetime.fromtimestamp(self.saved_at).strftime("%Y-%m-%d %H:%M:%S")
        except (OverflowError, ValueError, OSError):
            when = "at an unknown time"
        where = self.path or "an untitled document"
        words = len(self.text.split())
        how = {
            "kept before reload": "kept before the file was reloaded",
            "interrupted save": "from a save that was interrupted (it may be incomplete)",
            "damaged": "from a recovery copy that was damaged (only the readable part is shown)",
            "backup before an interrupted save": "the complete previous version, backed up before a save "
            "that was interrupted — the file itself may be damaged (cut off in the middle); restore this "
            "and save to repair it,",
        }.get(self.kind, "autosaved")
        return f"{where}\n{how} {when} ({words:,} words)"


def session_of(file: Path) -> str:
    """The session id a recovery file belongs to (`<session>.json`, `<session>.saving.json`)."""
    return file.name.split(".", 1)[0]


def session_alive(folder: Path, session: str) -> bool:
    """True while the process that owns `session` runs: its lock is held. No PID is consulted."""
    return is_locked(folder / f"{session}.lock")


def encode_record(record: Mapping[str, object]) -> bytes:
    """A recovery record as UTF-8 JSON. A file name that is not valid UTF-8 (`r\\xe9sum\\xe9.txt` on Linux,
    held by Python as lone surrogates) cannot be written as raw UTF-8: it goes as JSON escapes (`\\udce9`),
    which read back to the very same name. Never raises UnicodeEncodeError (it once lost such a document's
    autosave silently)."""
    try:
        return json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(record, ensure_ascii=True).encode("ascii")


def _decode_copy(raw: bytes) -> str:
    """The text of a recovery file: UTF-8, or the same JSON re-encoded by another tool (UTF-16/32 with a byte
    order mark, or a legacy 8-bit encoding)."""
    for bom, codec in (
        (b"\xef\xbb\xbf", "utf-8-sig"),
        (b"\xff\xfe\x00\x00", "utf-32"),
        (b"\x00\x00\xfe\xff", "utf-32"),
        (b"\xff\xfe", "utf-16"),
        (b"\xfe\xff", "utf-16"),
    ):
        if raw.startswith(bom):
            return raw.decode(codec, errors="replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252" if not any(0x80 <= b < 0xA0 for b in raw) else "latin-1", errors="replace")


def _salvage_text(body: str) -> str | None:
    """The readable start of the "text" string of a cut-short record (a disk filled up mid-write, a sync tool
    truncated it), or None when there is none."""
    found = re.search(r'"text"\s*:\s*"', body)
    if not found:
        return None
    rest = body[found.end() :]
    decoder = json.JSONDecoder()
    for cut in (len(rest), *range(len(rest) - 1, max(-1, len(rest) - 8), -1)):  # a partial escape at the end
        piece = rest[:cut]
        if piece.endswith("\\") and not piece.endswith("\\\\"):
            continue
        try:
            value, _ = decoder.raw_decode('"' + piece + ('"' if not piece.endswith('"') else ""))
        except ValueError:
            continue
        if isinstance(value, str):
            return value
    return None


def read_copy(file: Path) -> RecoveredDocument | None:
    """One recovery file as a document to offer, whatever shape it is in: fields of the wrong type are taken
    for what they can mean (a time that is NaN or absurd becomes the file's own time, a path that is not text
    becomes "no file"), a copy without text is nothing to offer, and a cut-short or re-encoded copy offers the
    text that can still be read (kind "damaged"). None only when there is no text at all."""
    try:
        raw = file.read_bytes()
        modified = file.stat().st_mtime
    except OSError as exc:
        log.warning("skipping unreadable recovery file %s: %s", file.name, exc.strerror or exc)
        return None
    body = _decode_copy(raw)
    kind = ""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        text = _salvage_text(body)
        if text is None:
            log.warning("recovery file %s holds no readable text; it is kept", file.name)
            return None
        data, kind = {"text": text}, "damaged"
        found = re.search(r'"path"\s*:\s*("(?:[^"\\]|\\.)*")', body)
        if found:
            with contextlib.suppress(ValueError):
                data["path"] = json.loads(found.group(1))
    text = data.get("text")
    if not isinstance(text, str):
        log.warning("recovery file %s has no text (%s); it is kept", file.name, type(text).__name__)
        return None
    path = data.get("path")
    saved_at = data.get("saved_at")
    if (
        isinstance(saved_at, bool)
        or not isinstance(saved_at, (int, float))
        or not (0 <= saved_at <= time.time() + 86_400)
    ):
        saved_at = modified
    pid = data.get("pid")
    stated = data.get("kind")
    if not kind:
        kind = stated if isinstance(stated, str) and stated else "autosave"
        if raw[:1] not in (b"{", b" ", b"\n") and not raw.startswith(b"\xef\xbb\xbf"):
            kind = "damaged"  # re-encoded by another tool: the text is right, but say where it came from
    if isinstance(path, str) and path:
        note_document(path)  # the log hides the names of recovered documents too
    return RecoveredDocument(
        file=file,
        text=text,
        path=path if isinstance(path, str) and path and "\0" not in path else None,
        saved_at=float(saved_at),
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else 0,
        kind=kind,
    )


def find_recovered(folder: Path, *, own: str | None = None) -> list[RecoveredDocument]:
    """Autosaves whose session is gone (lock free), oldest first. A damaged copy never hides the others: each
    file is read on its own (`read_copy`), and one without any readable text is left where it is."""
    found: list[RecoveredDocument] = []
    if not folder.is_dir():
        return found
    for file in sorted(folder.glob("*.json")):
        if file.name.endswith(".saving.json"):
            continue
        session = session_of(file)
        if session == own or session_alive(folder, session):
            continue
        try:
            if not file.is_file():  # a FIFO or a folder in a copy's place would hang or fail every start
                log.warning("skipping recovery entry %s: not a regular file", file.name)
                continue
        except OSError:
            continue
        doc = read_copy(file)
        if doc is not None:
            found.append(doc)
    return sorted(found, key=lambda d: d.saved_at)


def clean_interrupted_saves(folder: Path, *, own: str | None = None) -> list[Path]:
    """Deal with temporary files of saves that a crash interrupted (sessions whose lock is free): a temp that
    adds nothing to the document on disk is removed; one holding other text becomes a recovery copy first
    (kind "interrupted save"), so the writer is offered it. Returns the recovery copies made."""
    made: list[Path] = []
    if not folder.is_dir():
        return made
    for journal in sorted(folder.glob("*.saving.json")):
        session = session_of(journal)
        if session == own or session_alive(folder, session) or not _regular(journal):
            continue
        try:
            entries = json.loads(journal.read_text(encoding="utf-8")).get("temps", [])
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("unreadable save journal %s: %s", journal.name, exc)
            entries = []
        keep_journal = False
        for entry in entries:
            try:
                temp, target = Path(entry["temp"]), Path(entry["target"])
            except (KeyError, TypeError):
                continue
            done, copy = settle_temp(folder, temp, target)
            keep_journal |= not done
            if copy is not None:
                made.append(copy)
        if not keep_journal:
            with contextlib.suppress(OSError):
                journal.unlink()
            with contextlib.suppress(OSError):
                (folder / f"{session}.lock").unlink()
    return made


# `.<name>.<8 of mkstemp's characters>.<suffix>`: what app.platform.atomic creates. The `.lptmp`/`.lpbackup`
# suffixes are
# Letterpress's own; `.tmp`/`.backup` (older versions) are also what other programs write, so those are
# "maybe ours".
_OUR_TEMP = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.(?P<suffix>lptmp|lpbackup|tmp|backup)$")
STRAY_AGE_S = 120.0  # a save in progress notes its temp within microseconds; two minutes is beyond doubt


def sweep_stray_temps(folder: Path, document: Path, *, now: float | None = None) -> list[Path]:
    """Temporary files next to `document` left by an interrupted save that no journal knows (an older version,
    or a journal that could not be written). Nothing Letterpress did not provably write is deleted: a `.lptmp`
    or `.lpbackup` of this document that is a regular file holding text is settled like
    `clean_interrupted_saves`
    does; a `.tmp`/`.backup` (another program may use those names) is removed only when its bytes are exactly
    the document's, its text is offered (once) when it differs, and a binary one is left alone. Files younger
    than `STRAY_AGE_S` or listed by a running session's journal are left alone. Returns the recovery copies
    made."""
    from app.platform.atomic import temp_prefix

    real = Path(os.path.realpath(document))
    now = time.time() if now is None else now
    live: set[str] = set()
    if folder.is_dir():
        for journal in folder.glob("*.saving.json"):
            if _regular(journal) and session_alive(folder, session_of(journal)):
                with contextlib.suppress(OSError, ValueError, AttributeError, KeyError, TypeError):
                    live.update(e["temp"] for e in json.loads(journal.read_text(encoding="utf-8"))["temps"])
    made: list[Path] = []
    try:
        siblings = list(real.parent.iterdir())
    except OSError:
        return made
    names = {real.name, temp_prefix(real.name)[1:-1]}
    for temp in siblings:
        found = _OUR_TEMP.match(temp.name)
        if not found or found.group("name") not in names or str(temp) in live:
            continue
        try:
            st = os.lstat(temp)
            if now - st.st_mtime < STRAY_AGE_S or not stat.S_ISREG(st.st_mode):
                continue
        except OSError:
            continue
        ours = found.group("suffix") in ("lptmp", "lpbackup")
        _, copy = settle_temp(folder, temp, real, remove=ours)
        if copy is not None:
            made.append(copy)
    return made


def _regular(path: Path) -> bool:
    """A regular file (not a FIFO, device or folder put in its place: reading those would hang every
    start)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _already_kept(folder: Path, source: dict[str, object]) -> bool:
    """A recovery copy of this very leftover (same path, size and time) exists already."""
    for file in folder.glob("*.json") if folder.is_dir() else []:
        if not _regular(file) or file.name.endswith(".saving.json"):
            continue
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(file.read_text(encoding="utf-8"))
            if isinstance(record, dict) and record.get("source") == source:
                return True
    return False


def settle_temp(folder: Path, temp: Path, target: Path, *, remove: bool = True) -> tuple[bool, Path | None]:
    """Remove `temp`, first keeping its text as a recovery copy when it differs from `target`. Returns (done,
    copy): done is False when the temp had to stay (unreadable, or its text could not be kept). With
    `remove=False` (a file that may be another program's) it is only removed when it holds exactly the
    target's
    bytes; otherwise its text is kept as a recovery copy once, and the file stays. A file that is not a
    regular
    file, or holds no text (binary: not what a save of a document writes), is never read into a copy nor
    removed."""
    from app.documents.file_formats import DocumentError, decode_text, looks_binary

    if not _regular(temp):
        return (not temp.exists()), None
    try:
        st = temp.stat()
        if st.st_size > 256 * 1024**2:
            return False, None
        data = temp.read_bytes()
    except FileNotFoundError:
        return True, None
    except OSError as exc:
        log.warning("leftover temporary file not readable: %s", exc)
        return False, None
    try:
        same = target.read_bytes() == data if _regular(target) else False
    except OSError:
        same = False
    copy: Path | None = None
    if not same:
        try:
            text = decode_text(data, temp.name).text
        except DocumentError:
            text = None
        if text is None or (not remove and looks_binary(data)):
            log.info("left %s alone: it does not hold text a save of %s would write", temp.name, target.name)
            return False, None
        source = {"path": str(temp), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if remove or not _already_kept(folder, source):
            # A `.lpbackup`/`.backup` is the verified old version of an in-place rewrite (hard links):
            # complete,
            # while the rewrite it protected may have left the file torn on every link.
            backup = temp.name.endswith((".lpbackup", ".backup"))
            kind = "backup before an interrupted save" if backup else "interrupted save"
            record = {
                "version": FORMAT_VERSION,
                "pid": 0,
                "path": str(target),
                "kind": kind,
                "saved_at": st.st_mtime,
                "source": source,
                "text": text,
            }
            copy = folder / f"{uuid.uuid4().hex}.json"
            try:
                folder.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(copy, encode_record(record))
            except OSError as exc:
                log.warning("could not keep the text of an interrupted save: %s", exc)
                return False, None
        if not remove:
            return False, copy
    with contextlib.suppress(OSError):
        temp.unlink()
        log.info("removed %s left by an interrupted save", temp.name)
    return True, copy


def autosave_failure_reason(exc: OSError) -> str:
    """What the status bar says when autosave cannot write: the reason and what to do."""
    if exc.errno == errno.ENOSPC or exc.errno == getattr(errno, "EDQUOT", -1):
        return "Autosave failed: the recovery folder's disk is full — save your document elsewhere."
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            "Autosave failed: the recovery folder cannot be written (no permission or a read-only disk) — "
            "save your document now, and check the data folder."
        )
    return f"Autosave failed: {exc.strerror or exc} — save your document now."


def _ask_box(parent: QWidget | None, doc: RecoveredDocument, index: int, total: int) -> Answer:
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle("Recover unsaved work")
    counter = f" ({index} of {total})" if total > 1 else ""
    box.setText(f"Letterpress did not close normally. Restore the unsaved text of “{doc.name}”{counter}?")
    box.setInformativeText(doc.describe())
    restore = box.addButton("Restore", QMessageBox.ButtonRole.AcceptRole)
    discard = box.addButton("Discard", QMessageBox.ButtonRole.DestructiveRole)
    box.addButton("Ask again next time", QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(restore)
    box.exec()
    clicked = box.clickedButton()
    return "restore" if clicked is restore else "discard" if clicked is discard else "later"


class RecoveryManager(QObject):
    """Autosaves one document (through `snapshot()`, which returns `(text, path)` or None when nothing is
    unsaved) every `interval` seconds, and offers recovered copies at start.

    Wire it with `connect_document(controller)` so a save or discard removes the copy; `shutdown()` on a clean
    quit removes it too. It holds the session lock `<session>.lock` from construction to `shutdown()`, and is
    the controller's save journal (`note_temp` / `temps_done`) so temporary files of an interrupted save are
    found at the next start.
    """

    autosaved = Signal(str)  # path of the recovery file just written (emitted on the autosave thread)
    # "" when autosave works, else what failed and what to do; emitted on the UI thread on every change
    statusChanged = Signal(str)
    _writeResult = Signal(str)  # from the autosave thread to `_on_write_result` (queued onto the UI thread)

    def __init__(
        self,
        folder: Path,
        snapshot: Callable[[], tuple[str, str | None] | None],
        *,
        interval_s: float = 5.0,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.folder = folder
        self.snapshot = snapshot
        self.session = uuid.uuid4().hex
        self.file = folder / f"{self.session}.json"
        self.journal = folder / f"{self.session}.saving.json"
        self.lock = FileLock(folder / f"{self.session}.lock")
        try:
            self.lock.acquire(holder_info(session=self.session))
        except OSError as exc:  # the copy can still be written; it just is not protected from another start
            log.warning("recovery session lock not taken: %s", exc.strerror or exc)
        self.ask: Callable[[RecoveredDocument, int, int], Answer] = lambda doc, i, n: _ask_box(
            parent if isinstance(parent, QWidget) else None, doc, i, n
        )
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="autosave")
        self._last: tuple[str, str | None] | None = None
        self._pending: Future[None] | None = None
        self._temps: list[dict[str, str]] = []
        self.failure = ""  # why the last autosave failed; "" while autosave works
        self._writeResult.connect(self._on_write_result)
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.autosave_now)
        # The loss window: text typed since the last copy. A copy IDLE_MS after the last key (each key
        # restarts
        # the wait, so a fast typist costs no copies) brings it down from the interval to a pause's length.
        self._idle = QTimer(self, singleShot=True)
        self._idle.setInterval(IDLE_MS)
        self._idle.timeout.connect(self.autosave_now)
        self.set_interval(interval_s)
        self._timer.start()

    def set_interval(self, seconds: float) -> None:
        self._timer.setInterval(max(200, int(seconds * 1000)))

    def connect_settings(self, settings: Settings) -> None:
        """Follow `documents.autosave_seconds` live."""
        settings.follow(lambda v: v.documents.autosave_seconds, self.set_interval)

    def connect_document(self, controller: object) -> None:
        """Remove the autosave when the controller saves or discards the document; journal its saves; copy the
        text IDLE_MS after the writer stops typing (the interval timer stays as the backstop)."""
        editor = getattr(controller, "editor", None)
        if editor is not None:
            editor.document().contentsChanged.connect(self._idle.start)
        controller.saved.connect(lambda *_: self.clear())  # type: ignore[attr-defined]
        controller.discarded.connect(lambda *_: self.clear())  # type: ignore[attr-defined]
        if hasattr(controller, "save_journal"):
            controller.save_journal = self
        if hasattr(controller, "keep_copy"):
            controller.keep_copy = self.keep_copy
        if hasattr(controller, "opened"):
            controller.opened.connect(lambda path: self._sweep(Path(path), controller))

    def _sweep(self, document: Path, controller: object) -> None:
        """An opened document's folder may hold leftovers of a save no journal knows: tidy them, say so."""
        made = sweep_stray_temps(self.folder, document)
        if made and hasattr(controller, "message"):
            controller.message.emit(
                f"A save of {document.name} had been interrupted; its text is kept as a recovery copy and "
                "offered at the next start."
            )

    # -- autosave --------------------------------------------------------------------------------------------

    def _keep_lock(self) -> None:
        """The session lock must be the file at its path: if it was deleted or replaced while this window
        runs,
        take it again; if another start took that path meanwhile, move this session's copy to a new session
        (new names, new lock), so nothing else can take the live autosave for a leftover and discard it."""
        if not self.lock.held or self.lock.still_here():
            return
        self.lock.release()
        fresh = FileLock(self.folder / f"{self.session}.lock")
        with contextlib.suppress(OSError):
            if fresh.acquire(holder_info(session=self.session)):
                self.lock = fresh
                log.warning("the recovery session lock had been removed; it was taken again")
                self._last = None  # write the copy again: a second start may have removed it meanwhile
                return
        self.session = uuid.uuid4().hex
        self.file = self.folder / f"{self.session}.json"
        self.journal = self.folder / f"{self.session}.saving.json"
        self.lock = FileLock(self.folder / f"{self.session}.lock")
        with contextlib.suppress(OSError):
            self.lock.acquire(holder_info(session=self.session))
        log.warning("the recovery session lock was taken by another start; autosaving as a new session")
        self._last = None  # the old copy is that start's to offer now; this session writes its own at once

    def autosave_now(self) -> None:
        """Copy the unsaved text now (only if it changed since the last copy); no unsaved text: remove it."""
        self._keep_lock()
        try:
            snap = self.snapshot()
        except Exception:  # a broken snapshot must never take the timer down
            log.exception("autosave snapshot failed")
            return
        if snap is None:
            if self._last is not None:
                self.clear()
            return
        if snap == self._last:
            return
        self._last = snap
        text, path = snap
        record = {
            "version": FORMAT_VERSION,
            "pid": os.getpid(),
            "path": path,
            "saved_at": time.time(),
            "kind": "autosave",
            "text": text,
        }
        self._pending = self._pool.submit(self._write, record)

    def _write(self, record: Mapping[str, object]) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.file, encode_record(record))
        except OSError as exc:
            log.warning("autosave failed: %s", exc.strerror or exc)
            self._writeResult.emit(autosave_failure_reason(exc))
            return
        except Exception as exc:
            log.exception("autosave failed")
            self._writeResult.emit(f"Autosave failed ({type(exc).__name__}) — save your document now.")
            return
        self._writeResult.emit("")
        self.autosaved.emit(str(self.file))

    def _on_write_result(self, failure: str) -> None:
        if failure:
            self._last = None  # the next tick tries again, even if nothing was typed since
        if failure != self.failure:
            self.failure = failure
            self.statusChanged.emit(failure)

    def keep_copy(self, text: str, path: str | None, kind: str = "kept before reload") -> Path:
        """Write `text` as a recovery copy of its own, owned by no session, so the next start offers it (used
        before a reload replaces unsaved edits). Synchronous: the caller goes on only once it is on disk."""
        copy = self.folder / f"{uuid.uuid4().hex}.json"
        record = {
            "version": FORMAT_VERSION,
            "pid": os.getpid(),
            "path": path,
            "saved_at": time.time(),
            "kind": kind,
            "text": text,
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(copy, encode_record(record))
        return copy

    def clear(self) -> None:
        """Forget the copy (after a save or a discard); queued behind any write still in flight."""
        self._last = None
        self._pending = self._pool.submit(self._remove, self.file)

    @staticmethod
    def _remove(file: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            file.unlink()

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until queued writes are on disk (tests, shutdown)."""
        if self._pending is not None:
            self._pending.result(timeout)

    def shutdown(self, *, keep: bool = False) -> None:
        """Clean quit: nothing unsaved is left (the window asked), so the copy goes unless `keep`. The session
        lock is released last, so a kept copy becomes a leftover only once this process is done with it."""
        self._timer.stop()
        self._idle.stop()
        if not keep:
            self.clear()
        self._pool.shutdown(wait=True)
        self.lock.release()

    # -- the save journal ------------------------------------------------------------------------------------

    def note_temp(self, temp: Path, target: Path) -> None:
        """A save is about to write `temp` for `target`: recorded (synchronously) before any byte goes in."""
        self._temps.append({"temp": str(temp), "target": str(target)})
        self._store_journal()

    def temps_done(self) -> None:
        """The save finished (either way): its temporary files are gone."""
        if self._temps:
            self._temps = []
            self._store_journal()

    def _store_journal(self) -> None:
        try:
            if self._temps:
                self.folder.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(self.journal, encode_record({"temps": self._temps}))
            else:
                with contextlib.suppress(FileNotFoundError):
                    self.journal.unlink()
        except OSError as exc:  # the save itself must go on
            log.warning("save journal not written: %s", exc.strerror or exc)

    # -- recovery --------------------------------------------------------------------------------------------

    def pending(self) -> list[RecoveredDocument]:
        """Copies of dead sessions (their lock is free), after tidying up their interrupted saves."""
        clean_interrupted_saves(self.folder, own=self.session)
        return find_recovered(self.folder, own=self.session)

    def offer(self, restore: Callable[[RecoveredDocument], bool]) -> list[RecoveredDocument]:
        """Ask about each recovered copy. `restore(doc)` puts it somewhere and returns False if it could not
        (e.g. the window already shows another restored document); such copies are kept for next time.
        Returns the documents that were restored."""
        docs = self.pending()
        restored: list[RecoveredDocument] = []
        for i, doc in enumerate(docs, 1):
            answer = self.ask(doc, i, len(docs))
            if answer == "restore" and restore(doc):
                restored.append(doc)
                self._adopt(doc)
            elif answer == "discard":
                if session_alive(self.folder, session_of(doc.file)):
                    continue  # its window turned out to be running (it took its lock again): never delete
                self._remove(doc.file)
                self._remove(doc.file.with_name(f"{session_of(doc.file)}.lock"))
        return restored

    def _adopt(self, doc: RecoveredDocument) -> None:
        """A restored copy becomes this session's autosave until saved, so a second crash still keeps it."""
        self._last = (doc.text, doc.path)
        record = {
            "version": FORMAT_VERSION,
            "pid": os.getpid(),
            "path": doc.path,
            "saved_at": doc.saved_at,
            # rebuilt from what was read: a damaged file is not copied
            "kind": doc.kind,
            "text": doc.text,
        }
        self._pending = self._pool.submit(self._adopt_file, doc.file, record)

    def _adopt_file(self, old: Path, record: Mapping[str, object]) -> None:
        try:
            atomic_write_bytes(self.file, encode_record(record))
            old.unlink()
            with contextlib.suppress(OSError):
                old.with_name(f"{session_of(old)}.lock").unlink()
        except OSError as exc:
            log.warning("could not take over recovery file %s: %s", old.name, exc)
