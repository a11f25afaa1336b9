"""A model's answer -> the text that goes in the document: preamble and notes off, the rewrite's length held,
an infill joined to both sides. Pure functions over strings, also applied to a partial answer while it
streams, so the ghost never shows "Sure! Here is…" and then drops it.

Why each cut: instruction-tuned models (SmolLM2, Gemma, Llama) open with a greeting or a label and end with
a note about what they changed; a chat model asked to fill a gap often repeats the text after it; and a
rewrite comes back longer than the window the local engine holds (`engine.remote.text_prompts.word_window`).
"""

from __future__ import annotations

import re

from engine.remote.text_prompts import Words

_PREAMBLE = re.compile(
    r"^\s*(?:sure|certainly|of course|okay|ok|absolutely|here(?:'s| is| are)|below is)\b[^\n]*?"
    r"(?::|!|\.)[ \t]*(?:\n+|$)",
    re.IGNORECASE,
)
_LABEL = re.compile(
    r"^\s*\**(?:(?:the\s+)?(?:rewritten|revised|corrected|edited|simplified|shorter|longer|formal|casual|"
    r"missing|new|final|continued)\s+)?(?:text|version|sentence|passage|paragraph|answer|gap|rewrite)\**\s*:"
    r"\**[ \t]*\n?",
    re.IGNORECASE,
)
_NOTE = re.compile(
    r"\n\s*\n\s*(?:\(?note|explanation|changes|i (?:have|made|changed|rewrote|replaced)|this (?:version|"
    r"rewrite|revision)|in this|the (?:changes|revised|rewritten))\b",
    re.IGNORECASE,
)
_QUOTES = (('"', '"'), ("“", "”"), ("'", "'"), ("`", "`"), ("«", "»"))
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*(?=\s|$)")


def clean(text: str, source: str = "") -> str:
    """`text` without a greeting, a label, a trailing note, or quotes and bold that `source` (the
    selection, when there is one) did not have; surrounding whitespace is the caller's business."""
    out = _PREAMBLE.sub("", text, count=1)
    out = _LABEL.sub("", out, count=1)
    note = _NOTE.search(out)
    if note:
        out = out[: note.start()]
    if "\n\n" not in source.strip():  # one paragraph asked for: one paragraph back
        first = re.split(r"\n\s*\n", out.strip(), maxsplit=1)
        out = first[0] if first else ""
    out = out.strip()
    if "**" in out and "**" not in source:
        out = out.replace("**", "")
    for left, right in _QUOTES:
        s = source.strip()
        if len(out) >= 2 and out.startswith(left) and out.endswith(right) and not s.startswith(left):
            out = out[len(left) : -len(right)].strip()
    return out


def cut_to_words(text: str, words: Words) -> str:
    """`text` held to the window's top: cut after the last sentence that ends within it (if that keeps at
    least the window's bottom), else after its top word."""
    parts = text.split()
    if len(parts) <= words.high:
        return text
    head = text[: _end_of_word(text, words.high)]
    best = ""
    for m in _SENTENCE_END.finditer(head):
        if len(head[: m.end()].split()) >= words.low:
            best = head[: m.end()]
    return (best or head).rstrip()


def over_window(text: str, words: Words) -> bool:
    """The answer has gone past the window's top: reading on is wasted (the cut drops it)."""
    return len(text.split()) > words.high + 1


def _end_of_word(text: str, count: int) -> int:
    for seen, m in enumerate(re.finditer(r"\S+", text), start=1):
        if seen == count:
            return m.end()
    return len(text)


def rewrite_text(answer: str, selection: str, words: Words | None) -> str:
    """The rewrite as it replaces the selection: cleaned, held to its window, with the selection's own
    leading and trailing whitespace (so the join with the text around it is unchanged)."""
    core = clean(answer, selection)
    if words is not None:
        core = cut_to_words(core, words)
    if not core:
        return ""
    lead = selection[: len(selection) - len(selection.lstrip())]
    trail = selection[len(selection.rstrip()) :]
    return f"{lead}{core}{trail}"


def draft_text(answer: str, before: str, *, cleaned: bool) -> str:
    """A draft as it goes after `before`: a continuation as written (no space doubled at the join); a chat
    answer cleaned and spaced from the text before it."""
    text = clean(answer, "") if cleaned else answer
    return _join_left(text, before)


def infill_text(answer: str, before: str, after: str) -> str:
    """The gap's text, cut so it joins both sides: no repeat of the text after the gap (or of the end of the
    text before it), and a space where words would otherwise run together."""
    text = clean(answer, "")
    text = _drop_repeat_of_after(text, after)
    text = _drop_repeat_of_before(text, before)
    text = _join_left(text, before)
    if text and after and not text[-1].isspace() and after[0].isalnum():
        text += " "
    if text and after[:1].isspace():
        text = text.rstrip()
    return text


def _join_left(text: str, before: str) -> str:
    if not text:
        return ""
    if not before or before[-1].isspace():
        return text.lstrip(" \t") if before else text
    if text[0].isspace() or text[0] in ".,;:!?)]}'’”":
        return text
    return " " + text


def _drop_repeat_of_after(text: str, after: str) -> str:
    """The answer without the start of `after` that a model often writes on into."""
    tail = after.strip()
    if not tail or not text:
        return text
    head = tail[: max(len(text), 1)]
    for size in range(min(len(text), len(head)), 3, -1):  # the longest overlap of >= 4 characters
        if text.endswith(head[:size]):
            return text[: len(text) - size].rstrip()
    at = text.find(tail[: min(len(tail), 40)])
    if at > 0 and len(tail) >= 12:  # the ending repeated whole, with more after it
        return text[:at].rstrip()
    return text


def _drop_repeat_of_before(text: str, before: str) -> str:
    end = before.strip()[-60:]
    if len(end) >= 12 and text.startswith(end):
        return text[len(end) :]
    return text
