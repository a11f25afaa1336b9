"""Seeded random sessions on the real editor widget: typing, suggestions, partial accepts, undo and redo.

After every action: the document is exactly what the writer typed plus what they accepted (an accept inserts
a prefix of the visible suggestion at one place, or replaces the rewritten selection, and changes nothing
else); a suggestion never changes the document by itself; undo right after an accept restores the text byte
for byte and redo brings the accepted text back.
"""

from __future__ import annotations

import random

import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeyEvent, QTextCursor
from PySide6.QtWidgets import QApplication

from engine.fake import FakeEngine
from tests.helpers.gui import build_window, ghost_state, ghost_text

SUGGESTIONS = [" alpha beta\ngamma delta", " 한국어 문장 👋🏽 done", " שלום and more\nnext line here"]
WORDS = ["the ", "sea ", "Boat", ". ", "\n", "바다 ", "海", "🎉", "مرحبا ", "x"]


pytestmark = pytest.mark.usefixtures("user_dirs")


def type_text(editor, text: str) -> None:
    """Real key events (QTest cannot type non-ASCII, so the events are built by hand)."""
    for ch in text:
        key = Qt.Key.Key_Return if ch == "\n" else Qt.Key.Key_unknown
        for kind in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease):
            QApplication.sendEvent(editor, QKeyEvent(kind, key, Qt.KeyboardModifier.NoModifier, ch))


def inserted_prefix(old: str, new: str, ghost: str, *, whole: bool = False) -> bool:
    """`new` is `old` with a non-empty prefix of `ghost` (all of it when `whole`) put in at one position; only
    whitespace at the join may differ (app.assist.suggestion.join fixes doubled spaces and glued words on the
    suggestion's side)."""
    want = ghost.strip()
    for i in range(len(old) + 1):
        if new[:i] != old[:i]:
            break
        for w in range(0, 3):  # a join space already in the region may be replaced
            rest = old[i + w :]
            if not old[i : i + w].isspace() and w:
                continue
            if len(new) - len(rest) < i or not new.endswith(rest):
                continue
            middle = new[i : len(new) - len(rest)].strip()
            if middle and (middle == want if whole else ghost.lstrip().startswith(middle)):
                return True
    return False


def replaced_by_prefix(old: str, new: str, region: tuple[int, int], ghost: str, *, whole: bool) -> bool:
    """`new` is `old` with `region` replaced by a prefix of `ghost` (whitespace at the joins aside)."""
    s, e = region
    if not (new.startswith(old[:s]) and new.endswith(old[e:]) and len(new) >= s + len(old) - e):
        return False
    middle = new[s : len(new) - (len(old) - e)].strip()
    return bool(middle) and (middle == ghost.strip() if whole else ghost.lstrip().startswith(middle))


class Session:
    def __init__(self, qtbot, window, rng: random.Random) -> None:
        self.qtbot, self.w, self.rng = qtbot, window, rng
        self.editor = window.editor
        self.text = ""  # what the writer typed and accepted, as the writer expects it
        self.rewrite_region: tuple[int, int] | None = None
        self.log: list[str] = []

    def check(self) -> None:
        assert self.editor.toPlainText() == self.text, "\n".join(self.log[-8:])

    def wait_settled(self) -> None:
        self.qtbot.waitUntil(lambda: ghost_state(self.w) != "denoising", timeout=10_000)

    # -- actions ---------------------------------------------------------------------------------------------

    def move(self) -> None:
        c = self.editor.textCursor()
        c.setPosition(self.rng.randint(0, len(self.editor.toPlainText())))
        self.editor.setTextCursor(c)
        self.log.append(f"move {c.position()}")

    def type(self) -> None:
        word = self.rng.choice(WORDS)
        c = self.editor.textCursor()
        if c.hasSelection():
            c.clearSelection()
            self.editor.setTextCursor(c)
        pos = c.position()
        self.log.append(f"type {word!r} at {pos} (ghost {ghost_state(self.w)})")
        before = self.editor.toPlainText()
        type_text(self.editor, word)
        # Qt counts UTF-16 units; Python counts code points. Map through the text the editor had.
        py_pos = len(before.encode("utf-16-le")[: 2 * pos].decode("utf-16-le"))
        self.text = self.text[:py_pos] + word + self.text[py_pos:]
        self.check()

    def draft(self) -> None:
        self.log.append("draft")
        self.w.actionDraft.trigger()
        self.rewrite_region = None
        self.check()  # a request alone never touches the document
        if self.rng.random() < 0.5:  # often the writer waits and takes (some of) it
            self.accept(self.rng.choice(["all", "word", "line"]))

    def rewrite(self) -> None:
        text = self.editor.toPlainText()
        if len(text) < 2:
            return
        s = self.rng.randint(0, len(text) - 1)
        e = self.rng.randint(s + 1, len(text))
        if not text[s:e].strip():
            return
        c = self.editor.textCursor()
        units = lambda i: len(text[:i].encode("utf-16-le")) // 2  # noqa: E731
        c.setPosition(units(s))
        c.setPosition(units(e), QTextCursor.MoveMode.KeepAnchor)
        self.editor.setTextCursor(c)
        self.log.append(f"rewrite {s}:{e}")
        self.w.actionRewrite.trigger()
        self.rewrite_region = (s, e)
        self.wait_settled()
        self.check()
        if self.rng.random() < 0.5:
            self.accept("all")

    def accept(self, how: str) -> None:
        self.wait_settled()
        if ghost_state(self.w) != "ready":
            return
        ghost, old = ghost_text(self.w), self.editor.toPlainText()
        action = {
            "all": self.w.actionAcceptSuggestion,
            "word": self.w.actionAcceptWord,
            "line": self.w.actionAcceptLine,
        }[how]
        self.log.append(f"accept {how} of {ghost!r}")
        action.trigger()
        new = self.editor.toPlainText()
        if self.rewrite_region is not None:
            assert replaced_by_prefix(old, new, self.rewrite_region, ghost, whole=how == "all"), "\n".join(
                self.log[-8:]
            )
            self.rewrite_region = None  # the rest (if any) now continues right after the accepted words
        else:
            assert inserted_prefix(old, new, ghost, whole=how == "all"), "\n".join(self.log[-8:])
        self.text = new
        # One undo step restores the exact text from before the accept; redo brings the accept back.
        self.editor.undo()
        assert self.editor.toPlainText() == old, "\n".join(self.log[-8:])
        self.editor.redo()
        assert self.editor.toPlainText() == new, "\n".join(self.log[-8:])
        assert ghost_state(self.w) in ("idle", "ready")

    def dismiss(self) -> None:
        self.log.append("dismiss")
        self.w.actionDismissSuggestion.trigger()
        self.rewrite_region = None
        self.check()

    def undo_redo(self) -> None:
        before = self.editor.toPlainText()
        self.log.append("undo+redo")
        self.editor.undo()
        self.editor.redo()
        assert self.editor.toPlainText() == before, "\n".join(self.log[-8:])
        self.text = before

    def undo(self) -> None:
        """Undo may take back typing too; afterwards the writer expects whatever undo produced, and redo must
        return to exactly the text before."""
        before = self.editor.toPlainText()
        self.log.append("undo")
        self.editor.undo()
        after = self.editor.toPlainText()
        self.editor.redo()
        assert self.editor.toPlainText() == before, "\n".join(self.log[-8:])
        self.editor.undo()
        assert self.editor.toPlainText() == after
        self.text = after
        self.rewrite_region = None


@pytest.mark.parametrize("seed", range(6))
def test_random_editing_session_never_loses_or_invents_text(qtbot, seed):
    rng = random.Random(seed)
    engine = FakeEngine(texts=SUGGESTIONS, steps=3, step_delay=0.002)
    window = build_window(qtbot, engine)
    s = Session(qtbot, window, rng)
    actions = [
        (s.type, 30),
        (s.move, 10),
        (s.draft, 12),
        (s.rewrite, 5),
        (lambda: s.accept("all"), 8),
        (lambda: s.accept("word"), 8),
        (lambda: s.accept("line"), 5),
        (s.dismiss, 4),
        (s.undo, 6),
        (s.undo_redo, 4),
    ]
    funcs, weights = zip(*actions, strict=True)
    for _ in range(80):
        rng.choices(funcs, weights)[0]()
        s.check()
    s.wait_settled()
    s.check()
    accepted = sum(1 for line in s.log if line.startswith("accept"))
    assert accepted >= 3, "the session should have exercised accepts"
