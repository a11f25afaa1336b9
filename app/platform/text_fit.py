"""Shortening text at a word: the one rule every label, list row and message that cannot show all its text
follows (the whole words that fit and "…", never a cut inside a word when a whole word fits).

Qt-free and at the bottom layer, so the settings' messages and the widgets share it: fitting by pixels
(`elide_words` with a font-metrics test) and by characters (`shorten_words`).
"""

from __future__ import annotations

from collections.abc import Callable

ELLIPSIS = "…"


def elide_words(text: str, fits: Callable[[str], bool]) -> str:
    """The longest run of whole words of `text` that fits, followed by "…" (the text itself when it fits)."""
    if fits(text):
        return text
    words = text.split(" ")
    lo, hi = 0, len(words)
    while lo < hi:  # the most words that still fit with the ellipsis
        mid = (lo + hi + 1) // 2
        if fits(" ".join(words[:mid]).rstrip(" ,;:") + ELLIPSIS):
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:  # not even one word: cut inside the first one rather than show nothing
        first = words[0]
        n = len(first)
        while n > 0 and not fits(first[:n] + ELLIPSIS):
            n -= 1
        return first[:n] + ELLIPSIS
    return " ".join(words[:lo]).rstrip(" ,;:") + ELLIPSIS


def shorten_words(text: str, limit: int) -> str:
    """`text` on one line in at most `limit` characters, ended at a word with "…" when it is longer."""
    return elide_words(" ".join(text.split()), lambda t: len(t) <= limit)


__all__ = ["ELLIPSIS", "elide_words", "shorten_words"]
