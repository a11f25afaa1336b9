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


def word_diff(original: str, new: tuple[Span, ...]) -> WordDiff:
    """Merge `original` (plain text) and the new spans into one sequence of styled spans."""
    old_words = split_words(original)
    a = [w.strip() for w in old_words]
    b = [s.text.strip() for s in new]
    spans: list[Span] = []
    styles: list[str] = []
    sources: list[int] = []
    deleted = inserted = 0

    def add_deleted(lo: int, hi: int) -> None:
        nonlocal deleted
        for word in old_words[lo:hi]:
            if not word.strip():
                continue
            spans.append(Span(word.strip(), 1.0))
            styles.append("deleted")
            sources.append(-1)
            deleted += 1

    def add_new(lo: int, hi: int, style: str) -> None:
        nonlocal inserted
        for j, span in enumerate(new[lo:hi], lo):
            spans.append(span)
            sources.append(j)
            styles.append(style if span.text.strip() else "")
            inserted += bool(style and span.text.strip())

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
    return WordDiff(tuple(_spaced(spans, styles)), tuple(styles), tuple(sources), deleted, inserted)


def word_diff_after(original: str, accepted: str, new: tuple[Span, ...]) -> WordDiff:
    """The diff of what is left to accept: `original` against `accepted` + `new`, with the accepted words (and
    the deletions before them) left out, so words the writer just took are never drawn as deleted."""
    if not accepted.strip():
        return word_diff(original, new)
    taken = [Span(w, 1.0) for w in split_words(accepted) if w.strip()]
    full = word_diff(original, (*taken, *new))
    n = len(taken)
    last = max((i for i, src in enumerate(full.sources) if 0 <= src < n), default=-1)
    spans: list[Span] = []
    styles: list[str] = []
    sources: list[int] = []
    for span, style, src in zip(
        full.spans[last + 1 :], full.styles[last + 1 :], full.sources[last + 1 :], strict=True
    ):
        spans.append(new[src - n] if src >= 0 else Span(span.text.strip(), span.confidence))  # respaced below
        styles.append(style)
        sources.append(src - n if src >= 0 else -1)
    deleted = sum(1 for st in styles if st == "deleted")
    inserted = sum(1 for sp, st in zip(spans, styles, strict=True) if st == "inserted" and sp.text.strip())
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
