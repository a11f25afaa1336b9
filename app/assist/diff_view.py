"""A rewrite as a word-level diff against the original: deleted words struck through, inserted words
highlighted.

Today's rewrite view strikes the original in the document and shows the new text in a card below it. The diff
view keeps that card but fills it with the merge of both texts, word by word (difflib's longest matching
blocks over whitespace-separated words, compared exactly): words kept are plain, words removed are struck
through in red, words added are highlighted, so a light rewrite reads as the handful of changes it is. The new
words keep their confidence shading and pins. It is a view only: Tab still inserts the new text, never the
diff.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from app.assist.ghost import GhostContent
from engine.api import Span

_WORD = re.compile(r"\s*\S+\s*|\s+")


@dataclass(frozen=True)
class WordDiff:
    spans: tuple[Span, ...]
    styles: tuple[str, ...]  # "", "deleted", "inserted" per span
    sources: tuple[int, ...]  # per span: its index among the new spans, or -1 for a deleted original word
    deleted: int
    inserted: int


def split_words(text: str) -> list[str]:
    """Words with their surrounding whitespace; joining them gives `text` back."""
    return _WORD.findall(text)


def word_pieces(new: tuple[Span, ...]) -> list[tuple[Span, int, int]]:
    """The new spans cut where a word of their joined text starts: (piece, span index, word index) per piece.

    The engine's spans are tokens, and a re-roll around pins cuts them at the pin ("water" then "a" for the
    word "watera"), so a span can hold part of a word or several words. Each piece holds one word with the
    space after it (-1 for the space before the first word), keeping its span's confidence and pin."""
    text = "".join(s.text for s in new)
    starts = [m.start() for m in re.finditer(r"\S+", text)]
    pieces: list[tuple[Span, int, int]] = []
    pos, word = 0, -1
    for index, span in enumerate(new):
        end = pos + len(span.text)
        cut = pos
        while cut < end:
            while word + 1 < len(starts) and starts[word + 1] <= cut:
                word += 1
            stop = starts[word + 1] if word + 1 < len(starts) and starts[word + 1] < end else end
            pieces.append((replace(span, text=text[cut:stop]), index, word))
            cut = stop
        pos = end
    return pieces


def _merge(original: str, new: tuple[Span, ...]) -> tuple[WordDiff, list[int]]:
    """`original` and the new spans merged word by word (whole words of the joined texts), before spacing;
    with the new text's word index of each span (-1 for deleted words and the space before the first)."""
    a = original.split()
    pieces = word_pieces(new)
    text = "".join(s.text for s in new)
    b = text.split()
    by_word: dict[int, list[tuple[Span, int]]] = {}
    for piece, index, word in pieces:
        by_word.setdefault(word, []).append((piece, index))
    spans: list[Span] = []
    styles: list[str] = []
    sources: list[int] = []
    words: list[int] = []
    deleted = inserted = 0

    def add_new(lo: int, hi: int, style: str) -> None:
        nonlocal inserted
        for word in range(lo, hi):
            for piece, index in by_word.get(word, []):
                spans.append(piece)
                styles.append(style if piece.text.strip() else "")  # a lone space is never highlighted
                sources.append(index)
                words.append(word)
        if style:
            inserted += hi - lo

    def add_deleted(lo: int, hi: int) -> None:
        nonlocal deleted
        for word in a[lo:hi]:
            spans.append(Span(word, 1.0))
            styles.append("deleted")
            sources.append(-1)
            words.append(-1)
        deleted += hi - lo

    for piece, index in by_word.get(-1, []):  # the space before the first word
        spans.append(piece)
        styles.append("")
        sources.append(index)
        words.append(-1)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            add_new(j1, j2, "")
        elif op == "delete":
            add_deleted(i1, i2)
        elif op == "insert":
            add_new(j1, j2, "inserted")
        else:
            add_deleted(i1, i2)
            add_new(j1, j2, "inserted")
    return WordDiff(tuple(spans), tuple(styles), tuple(sources), deleted, inserted), words


def word_diff(original: str, new: tuple[Span, ...]) -> WordDiff:
    """Merge `original` (plain text) and the new spans into one sequence of styled spans. Words are compared
    whole (the words of the joined new text, however its spans cut it), so a word is never drawn half kept
    and half inserted, and the counts are whole words."""
    merged, _words = _merge(original, new)
    return replace(merged, spans=tuple(_spaced(list(merged.spans), list(merged.styles))))


def word_diff_after(original: str, accepted: str, new: tuple[Span, ...]) -> WordDiff:
    """The diff of what is left to accept: `original` against `accepted` + `new`, with the accepted words (and
    the deletions before them) left out, so words the writer just took are never drawn as deleted."""
    if not accepted.strip():
        return word_diff(original, new)
    taken = [Span(w, 1.0) for w in split_words(accepted) if w.strip()]
    full, words = _merge(original, (*taken, *new))
    n = len(taken)
    last = max((i for i, src in enumerate(full.sources) if 0 <= src < n), default=-1)
    spans = list(full.spans[last + 1 :])
    styles = list(full.styles[last + 1 :])
    sources = [src - n if src >= 0 else -1 for src in full.sources[last + 1 :]]
    deleted = sum(1 for st in styles if st == "deleted")
    inserted = len({w for w, st in zip(words[last + 1 :], styles, strict=True) if st == "inserted"})
    return WordDiff(tuple(_spaced(spans, styles)), tuple(styles), tuple(sources), deleted, inserted)


def _spaced(spans: list[Span], styles: list[str]) -> list[Span]:
    """Deleted words separated from their neighbours by one space (whichever side the new words put
    theirs)."""
    out = list(spans)
    for i, style in enumerate(styles):
        if style != "deleted":
            continue
        text = out[i].text
        if i > 0 and not out[i - 1].text[-1:].isspace():
            text = " " + text
        if i + 1 < len(out) and not out[i + 1].text[:1].isspace():
            text = text + " "
        out[i] = Span(text, out[i].confidence)
    return out


def diff_hook(
    enabled: Callable[[], bool], on_diff: Callable[[WordDiff | None], None] | None = None
) -> Callable[[Any, GhostContent], GhostContent]:
    """An `Assistant.view_hooks` entry: rewrites are shown as a diff while `enabled()` says so; `on_diff`
    hears the diff drawn (or None), so a click on a drawn word can be mapped back to the suggestion's word."""

    def hook(sug: Any, content: GhostContent) -> GhostContent:
        if sug.kind != "rewrite" or content.error or not sug.original or not content.spans or not enabled():
            if on_diff is not None:
                on_diff(None)
            return content
        diff = word_diff_after(sug.original, getattr(sug, "accepted", ""), content.spans)
        if on_diff is not None:
            on_diff(diff)
        badge = f"−{diff.deleted} +{diff.inserted} words" + (f" · {content.badge}" if content.badge else "")
        return replace(content, spans=diff.spans, styles=diff.styles, badge=badge)

    return hook
