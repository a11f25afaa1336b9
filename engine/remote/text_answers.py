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


def cut_to_words(text: str, words: Words, hard: int | None = None) -> str:
    """`text` held to the window: past its top, cut after the last whole sentence within it that keeps at
    least the window's bottom; with no such sentence the text stays whole up to `hard` words (twice the
    selection: a sentence cut in the middle is worse than one a little long), and past `hard` it is cut at
    the last sentence end within `hard`, else after word `hard`."""
    count = len(text.split())
    if count <= words.high:
        return text
    cut = _last_sentence_within(text, words.high, words.low)
    if cut:
        return cut
    hard = hard if hard is not None else max(words.high, 2 * max(1, words.target))
    if count <= hard:
        return text
    return _last_sentence_within(text, hard, 1) or text[: _end_of_word(text, hard)].rstrip()


def _last_sentence_within(text: str, top: int, bottom: int) -> str:
    head = text[: _end_of_word(text, top)]
    best = ""
    for m in _SENTENCE_END.finditer(head):
        if len(head[: m.end()].split()) >= bottom:
            best = head[: m.end()]
    return best.rstrip()


def over_window(text: str, words: Words, selected: int) -> bool:
    """The answer has gone past all the cut could keep (twice the selection, or the window's top once a
    sentence has ended within it): reading on is wasted."""
    count = len(text.split())
    if count > 2 * max(1, selected) + 1:
        return True
    return count > words.high + 1 and bool(_last_sentence_within(text, words.high, words.low))


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
        core = cut_to_words(core, words, hard=2 * max(1, len(selection.split())))
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
    text = drop_repeat_of_before(text, before)
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


def _norm(word: str) -> str:
    return word.strip(".,;:!?\"'“”‘’()[]—–-").lower()


def _drop_repeat_of_after(text: str, after: str) -> str:
    """The answer without the text after the gap that a model often writes on into: from where the first
    words of `after` start in it (case and punctuation aside), or the end of it that is the start of
    `after`."""
    words = list(re.finditer(r"\S+", text))
    ahead = [_norm(w) for w in after.split()[:6]]
    if not words or not ahead or not ahead[0]:
        return text
    found = [_norm(m.group()) for m in words]
    need = min(3, len(ahead))
    for i in range(len(found) - need + 1):
        if found[i : i + need] == ahead[:need] and i > 0:
            return text[: words[i].start()].rstrip(" ,;:—–-")
    for size in range(min(len(found), len(ahead)), 0, -1):  # the answer's end is the ending's start
        if found[-size:] == ahead[:size] and (size >= 2 or len(ahead[0]) > 3) and size < len(found):
            return text[: words[-size].start()].rstrip()
    return text


def drop_repeat_of_before(text: str, before: str) -> str:
    """The answer without a repeat of the last words before the gap (case and punctuation aside)."""
    words = list(re.finditer(r"\S+", text))
    behind = [_norm(w) for w in before.split()[-12:]]
    found = [_norm(m.group()) for m in words]
    for size in range(min(len(found), len(behind)), 2, -1):
        if found[:size] == behind[-size:]:
            return text[words[size].start() :] if size < len(words) else ""
    return text


def first_sentences(text: str, limit: int) -> str:
    """A continuation up to its first sentence end (one that has at least three words), for a gap filled by
    continuing the text before it; the whole of it when no sentence ends."""
    for m in _SENTENCE_END.finditer(text):
        if len(text[: m.end()].split()) >= 3:
            return text[: m.end()]
    return text.split("\n\n", 1)[0] if limit else text
