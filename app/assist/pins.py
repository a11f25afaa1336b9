"""Pinned words of a visible suggestion, and the warm-started request that re-rolls around them.

The writer pins ghost words (a click, or Alt+P / Alt+Shift+P to extend or shrink the pinned run);
"re-roll uncertain words" pins every word at least as confident as a threshold. Either way the engine gets the
suggestion's text as a warm canvas (`engine.api.WarmStart`) with the pinned words' character ranges pinned
and every other position as noise, so pinned words come back exactly and the rest is denoised again, live, in
place. Pins are held as span indices of the shown alternative and are reset whenever its text changes; after a
re-roll the engine reports the pinned spans (`Span.pinned`), so pins survive the round trip.

In place means as shown: the canvas is the shown suggestion's own tokens (`Span.ids` -> `WarmStart.ids`), so a
pinned word comes back with as many tokens before it as it had, and it starts joining the document as the
shown text did (`WarmStart.keep_lead`), so Tab accepts a re-roll without a space gained or lost at its start.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import replace

from engine.api import DraftRequest, InfillRequest, Request, RewriteRequest, Span, WarmStart, new_request_id


def pin_ranges(spans: Sequence[Span], indices: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """Character ranges of `"".join(spans)` to pin for the spans at `indices`: each word with the one space
    just before it (where the tokenizer puts a word's space), never its trailing whitespace or a line
    break."""
    wanted = set(indices)
    full = "".join(s.text for s in spans)
    ranges: list[tuple[int, int]] = []
    pos = 0
    for i, span in enumerate(spans):
        text = span.text
        if i in wanted and text.strip():
            start = pos + len(text) - len(text.lstrip())
            end = pos + len(text.rstrip())
            if start > 0 and full[start - 1] == " ":  # "▁word": the space goes with the word
                start -= 1
            ranges.append((start, end))
        pos += len(text)
    merged: list[tuple[int, int]] = []
    for s, e in sorted(ranges):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return tuple(merged)


def confident(spans: Sequence[Span], threshold: float) -> set[int]:
    """The words the model is at least `threshold` sure of (whitespace-only spans never count)."""
    return {i for i, s in enumerate(spans) if s.text.strip() and s.confidence >= threshold}


def words(spans: Sequence[Span]) -> list[int]:
    return [i for i, s in enumerate(spans) if s.text.strip()]


class PinSet:
    """The pinned span indices of the shown alternative; reset when its text changes."""

    def __init__(self) -> None:
        self.indices: set[int] = set()
        self._key: tuple[Hashable, str] | None = None

    def sync(self, key: Hashable, spans: Sequence[Span]) -> set[int]:
        """The pins for `spans` of suggestion `key`; new text starts from the spans the engine reports
        pinned."""
        text = "".join(s.text for s in spans)
        if self._key != (key, text):
            self._key = (key, text)
            self.indices = {i for i, s in enumerate(spans) if s.pinned and s.text.strip()}
        return self.indices

    def toggle(self, index: int) -> bool:
        """Pin or unpin one word; True when it is pinned now."""
        if index in self.indices:
            self.indices.discard(index)
            return False
        self.indices.add(index)
        return True

    def extend(self, spans: Sequence[Span]) -> int | None:
        """Pin the next word after the last pinned one (the first word when none is); its index, or None."""
        order = words(spans)
        after = max(self.indices) if self.indices else -1
        for i in order:
            if i > after:
                self.indices.add(i)
                return i
        return None

    def shrink(self) -> int | None:
        """Unpin the last pinned word; its index, or None."""
        if not self.indices:
            return None
        last = max(self.indices)
        self.indices.discard(last)
        return last

    def clear(self) -> None:
        self.indices.clear()


def reroll_request(request: Request, spans: Sequence[Span], pinned: Iterable[int]) -> Request:
    """`request` again, starting from the shown text with `pinned` words pinned and the rest as noise.

    The canvas is the shown suggestion as it was: its own tokens (`Span.ids`, so each pinned word keeps the
    token position it had and the canvas its length), its start joining the document as it did
    (`keep_lead`: no space gained or lost before the first word), and when its last word is kept its end
    pinned with the whitespace after it (it ends there, as it did: nothing glued on, no line break lost)."""
    kept = set(pinned)
    text = "".join(s.text for s in spans)
    ranges = list(pin_ranges(spans, kept))
    order = words(spans)
    pin_end = bool(order and order[-1] in kept)
    if pin_end and ranges and len(text.rstrip()) < len(text):  # the trailing whitespace stays as shown
        ranges[-1] = (ranges[-1][0], len(text))
    ids = tuple(i for s in spans for i in s.ids)
    warm = WarmStart(text, pins=tuple(ranges), noise=1.0, pin_end=pin_end, ids=ids, keep_lead=True)
    if isinstance(request, (DraftRequest, RewriteRequest)):
        return replace(request, canvas=warm, request_id=new_request_id())
    if isinstance(request, InfillRequest):  # the shown middle fixes the length; the ending stays pinned
        return replace(request, canvas=warm, middle_tokens=None, request_id=new_request_id())
    raise TypeError("re-rolling works on drafts, rewrites and infills")
