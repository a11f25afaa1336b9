"""How an accepted suggestion meets the writer's text: whitespace at both ends of the region, fixed on our
side.

A model's rewrite or infill usually starts with a space (the tokenizer's word boundary), a draft may start
with a word right after the writer's last word, and a rewrite of a selection that ended a paragraph may come
back without the paragraph break. `join` decides what the region holds for an accepted prefix of a suggestion,
so the document reads as if a person had typed it: no doubled spaces, no glued words, no lost paragraph break,
no space left before a newline. It only ever shapes the suggestion's own text; the writer's characters outside
the region are never touched (the caller replaces the region and nothing else).

Pure functions of strings (no Qt), so the rules are tested directly and the window tests check their effect.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

H_SPACE = " \t"
# After these, a following word needs a space ("night." + "She" -> "night. She").
_CLOSERS = frozenset(".,;:!?)]}”’…")
_SPACE_BEFORE_NEWLINE = re.compile(r"[ \t]+\n")


@dataclass(frozen=True)
class Joined:
    """What the region holds: `lead` + `core` + `trail`; a remaining ghost continues right after `core`."""

    lead: str
    core: str
    trail: str

    @property
    def text(self) -> str:
        return self.lead + self.core + self.trail


def _wordlike(ch: str) -> bool:
    """A letter or digit of a script that separates words with spaces (not CJK, whose words are not
    spaced)."""
    return bool(ch) and ch.isalnum() and unicodedata.east_asian_width(ch) not in ("W", "F")


def needs_space(left: str, right: str) -> bool:
    """True when writing `right` directly after `left` would glue two words together."""
    return bool(left) and bool(right) and _wordlike(right) and (_wordlike(left) or left in _CLOSERS)


def _split_lead(text: str) -> tuple[str, str]:
    body = text.lstrip()
    return text[: len(text) - len(body)], body


def _split_trail(text: str) -> tuple[str, str]:
    body = text.rstrip()
    return body, text[len(body) :]


def join(left: str, text: str, right: str, *, original: str = "", complete: bool = True) -> Joined:
    """The region's text for the accepted `text`, between the writer's `left` and `right` characters.

    `left`/`right`: the document's character just before / just after the region ("" at a document edge).
    `original`: what the region held before (the selection a rewrite or infill replaces; "" for a draft),
    whose paragraph breaks at either end are kept. `complete`: `text` is the whole suggestion (its end meets
    `right`); otherwise a ghost still continues after it and only a separator is added so nothing reads glued
    meanwhile.
    """
    o_lead, o_rest = _split_lead(original)
    o_trail = _split_trail(o_rest)[1] if o_rest else ""
    # On the blank line between two paragraphs the text is a paragraph of its own: it was glued to both.
    own_line = left == "\n" and right == "\n" and not original.strip()
    # Leading end.
    ws, body = _split_lead(text)
    if ("\n" in o_lead and "\n" not in ws) or (
        not ws and o_lead
    ):  # the selection began with a paragraph break: keep it
        ws = o_lead
    if not left or left.isspace():  # a space after a space (or at the very start) doubles or dangles
        ws = ws.lstrip(H_SPACE)
    elif not ws and body and needs_space(left, body[0]):
        ws = " "
    ws = _SPACE_BEFORE_NEWLINE.sub("\n", ws)
    if own_line and body and "\n" not in ws:
        ws = "\n"
    if not body:  # all whitespace so far: only what separates is kept
        return Joined(ws if complete or "\n" in ws else "", "", "")
    if not complete:
        trail = ""
        if "\n" in o_trail and not body.endswith("\n"):
            trail = o_trail  # the paragraph break after the selection stays while the rest is still ghost
        elif o_trail and right and not right.isspace():
            trail = o_trail
        elif needs_space(body[-1], right):
            trail = " "
        return Joined(ws, body, _SPACE_BEFORE_NEWLINE.sub("\n", trail) if right else trail.rstrip(H_SPACE))
    # Trailing end of a complete suggestion.
    body, tws = _split_trail(body)
    if ("\n" in o_trail and "\n" not in tws) or (not tws and o_trail and right):
        tws = o_trail
    if not right or right.isspace():
        tws = tws.rstrip(H_SPACE)
    elif not tws and needs_space(body[-1], right):
        tws = " "
    if own_line and "\n" not in tws:
        tws = "\n"
    return Joined(ws, body, _SPACE_BEFORE_NEWLINE.sub("\n", tws))


def units(text: str) -> int:
    """Length in UTF-16 code units, the unit of Qt's document positions."""
    return len(text.encode("utf-16-le")) // 2


__all__ = ["Joined", "join", "needs_space", "units"]
