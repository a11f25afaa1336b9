"""Random sequences of suggestion actions typed into the real window, and the oracle that checks each state.

Shared by tests/app/test_randomized_accepts.py (scripted engine) and tests/e2e/test_gui_tiny.py (tiny
checkpoint). After every single action the document must be one of the states a writer could have made on
purpose: the original, or the original with the region replaced by a prefix of the alternative that was
accepted (whitespace at the two joins aside, and there checked on its own: no doubled space, no glued words) —
never anything else.
"""

from __future__ import annotations

import random

from PySide6.QtCore import Qt

from app.assist.suggestion import needs_space
from tests.helpers.gui import ghost_state, ghost_text, set_text

DOCS = [
    "It was morning. He counted the boats that had come back in the night. The sea was calm.",
    "First paragraph ends here.\n\nSecond paragraph, with a clause; and more words after it.\n\nThird.",
    "서울의 아침. The harbour 海 woke slowly 👋🏽 and the gulls returned — שלום and more.",
    "A short line.\nAnother line follows\nand a last one without a full stop",
]
ALTERNATIVES = [
    " She commanded the boats home before the light came.",
    "The gulls came back\nand the nets were dry by noon.",
    " 바다는 조용했다 and the 🎉 tide turned, slowly,",
    "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen",
]
CTRL, SHIFT, ALT = (
    Qt.KeyboardModifier.ControlModifier,
    Qt.KeyboardModifier.ShiftModifier,
    Qt.KeyboardModifier.AltModifier,
)
KEYS = {
    "word": (Qt.Key.Key_Right, CTRL),
    "line": (Qt.Key.Key_Backtab, SHIFT),
    "all": (Qt.Key.Key_Tab, None),
    "esc": (Qt.Key.Key_Escape, None),
    "undo": (Qt.Key.Key_Z, CTRL),
    "redo": (Qt.Key.Key_Z, CTRL | SHIFT),
    "next": (Qt.Key.Key_BracketRight, ALT),
    "prev": (Qt.Key.Key_BracketLeft, ALT),
}
WEIGHTS = {
    "word": 30,
    "line": 12,
    "all": 8,
    "esc": 6,
    "undo": 14,
    "redo": 10,
    "next": 5,
    "prev": 3,
    "wait": 6,
}


def units(text: str, i: int) -> int:
    return len(text[:i].encode("utf-16-le")) // 2


def allowed(original: str, region: tuple[int, int], doc: str, alternative: str | None) -> str:
    """Why `doc` is not a state the writer could have meant ("" when it is one)."""
    if doc == original:
        return ""
    if alternative is None:
        return "the document changed though nothing was accepted"
    s, e = region
    head, tail = original[:s], original[e:]
    if not (doc.startswith(head) and doc.endswith(tail) and len(doc) >= len(head) + len(tail)):
        return "text outside the region changed"
    middle = doc[len(head) : len(doc) - len(tail)]
    core = middle.strip()
    if not core or not alternative.lstrip().startswith(core):
        return f"the region holds {middle!r}, not a prefix of {alternative!r}"
    if original[s:e].strip() and original[s:e].strip() in middle and original[s:e].strip() not in alternative:
        return "the original stays beside the new words"
    if "  " in doc and "  " not in original and "  " not in alternative:
        return "a doubled space at a join"
    if " \n" in doc and " \n" not in original and " \n" not in alternative:
        return "a space left before a line break"
    joined = head + middle.lstrip()
    if middle and head and not middle[0].isspace() and needs_space(head[-1], middle[0]):
        return f"glued to the word before: {joined[len(head) - 8 : len(head) + 8]!r}"
    if middle and tail and not middle[-1].isspace() and needs_space(middle[-1], tail[0]):
        return "glued to the word after"
    return ""


class Round:
    """One request over a random region of one document, then random key presses, each checked."""

    def __init__(self, qtbot, window, rng: random.Random, log: list[str], timeout_ms: int = 10_000) -> None:
        self.qtbot, self.w, self.rng, self.log = qtbot, window, rng, log
        self.timeout_ms = timeout_ms
        self.editor = window.editor
        self.original = rng.choice(DOCS)
        self.kind = rng.choice(["rewrite", "infill", "infill", "gap"])
        text = self.original
        if self.kind == "gap":
            p = rng.choice([i for i in range(len(text) + 1) if i == 0 or text[i - 1] in " \n."])
            self.region = (p, p)
        else:
            while True:
                s = rng.randrange(0, len(text) - 1)
                e = rng.randrange(s + 1, min(len(text), s + 60) + 1)
                if text[s:e].strip():
                    break
            self.region = (s, e)
        self.alternative: str | None = None  # the alternative, as shown at the first accept
        self.actions = 0
        self.changed = 0  # actions that changed the document (accepts, undos and redos that did something)

    def start(self) -> None:
        s, e = self.region
        set_text(self.w, self.original, select=(units(self.original, s), units(self.original, e)))
        if s == e:
            set_text(self.w, self.original, cursor=units(self.original, s))
        self.log.append(f"--- {self.kind} {self.region} of {self.original[:30]!r}")
        (self.w.actionRewrite if self.kind == "rewrite" else self.w.actionInfill).trigger()
        if self.rng.random() < 0.6:  # often wait; otherwise act on the half-denoised ghost
            self.qtbot.waitUntil(lambda: ghost_state(self.w) != "denoising", timeout=self.timeout_ms)
        else:
            self.qtbot.waitUntil(
                lambda: ghost_text(self.w) != "" or ghost_state(self.w) != "denoising",
                timeout=self.timeout_ms,
            )
        self.check("start")

    def act(self) -> None:
        names, weights = zip(*WEIGHTS.items(), strict=True)
        name = self.rng.choices(names, weights)[0]
        typing = {
            "all": self.w.actionAcceptSuggestion,
            "line": self.w.actionAcceptLine,
            "next": self.w.actionNextAlternative,
            "prev": self.w.actionPreviousAlternative,
        }
        if name in typing and not typing[name].isEnabled():
            # With nothing to act on these keys are plain typing (Tab indents, Alt+] types "]"): the writer's
            # own edit, not a suggestion action; the sequence picks another action instead.
            return
        self.actions += 1
        if name == "wait":
            self.qtbot.wait(self.rng.choice([5, 30, 80]))
            self.check(name)
            return
        visible = ghost_text(self.w)
        if name in ("word", "line", "all") and visible and self.alternative is None:
            self.alternative = visible  # the alternative being accepted, as the writer saw it
        key, mods = KEYS[name]
        self.log.append(f"{name} (ghost {visible[:24]!r}, {ghost_state(self.w)})")
        before = self.editor.toPlainText()
        if mods is None:
            self.qtbot.keyClick(self.editor, key)
        else:
            self.qtbot.keyClick(self.editor, key, mods)
        self.changed += self.editor.toPlainText() != before
        self.check(name)

    def check(self, what: str) -> None:
        doc = self.editor.toPlainText()
        why = allowed(self.original, self.region, doc, self.alternative)
        assert not why, f"after {what}: {why}\n{doc!r}\n" + "\n".join(self.log[-12:])


def run_rounds(
    qtbot, window, rng: random.Random, rounds: int, actions: int, timeout_ms: int = 10_000
) -> tuple[int, int, int]:
    """`rounds` requests with `actions` checked key presses each; returns (actions run, rounds with an accept,
    actions that changed the document)."""
    log: list[str] = []
    total = accepted = changed = 0
    for _ in range(rounds):
        r = Round(qtbot, window, rng, log, timeout_ms)
        r.start()
        while r.actions < actions:
            r.act()
        total += r.actions
        changed += r.changed
        accepted += r.alternative is not None
        window.actionDismissSuggestion.trigger()
        qtbot.waitUntil(lambda: ghost_state(window) == "idle", timeout=timeout_ms)
        r.check("final dismiss")
    return total, accepted, changed
