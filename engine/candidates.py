"""Rows of ids -> the alternatives a writer sees: their spans at a step, the finished candidates, the distinct
ones.

One place decides what an alternative is, so the ghost text of a step, the finished result and the list the
writer cycles through agree: an infill row's suggestion is its middle up to its first stop id (the pinned
ending is the writer's own text), a draft or rewrite is cut to the tokens asked for, and an alternative that
came out empty or repeats another is not offered unless nothing else is left. Pure Python over lists (no
torch), so whoever holds rows of ids (the session, the tools, a front end) can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from engine.api import Candidate, Span

if TYPE_CHECKING:
    from engine.display import TokenText

T = TypeVar("T")


def distinct_nonempty(
    items: Sequence[T], text_of: Callable[[T], str] | None = None, wanted: int | None = None
) -> list[T]:
    """Alternatives worth cycling through, in order: an item whose text is empty (a row that ended at once) or
    repeats an earlier one is dropped, unless nothing else is left; at most `wanted` (at least one) when
    given.

    `text_of` reads an item's text (default: its `text` attribute: a `Candidate` or a `CandidateView`)."""
    read = text_of or (lambda item: item.text)  # type: ignore[attr-defined]
    seen: set[str] = set()
    kept = []
    for item in items:
        text = read(item)
        if text.strip() and text not in seen:
            seen.add(text)
            kept.append(item)
    found = kept or list(items[:1])
    return found if wanted is None else found[: max(1, wanted)]


def middle_of(
    text: TokenText, ids: list[int], conf: list[float], middle: int
) -> tuple[list[int], list[float]]:
    """An infill row's suggestion: its middle slots up to the first stop id (a row may end its middle early:
    what follows an end-of-turn is not part of it); control spans are left out whole by `TokenText.spans`
    (dropping the marker ids here would leave a span's inner text in the suggestion)."""
    ended = len(text.visible_ids(ids[:middle]))
    return ids[:ended], conf[:ended]


def row_spans(
    text: TokenText,
    ids: list[int],
    conf: list[float],
    *,
    earlier: Sequence[int] = (),
    middle: int | None = None,
    limit: int | None = None,
    pinned: list[bool] | None = None,
) -> tuple[Span, ...]:
    """The spans of one row at one step: `ids`/`conf` are its current canvas, `earlier` its finished canvases
    (a multi-block draft), `middle` an infill row's middle length, `limit` the tokens asked for, `pinned` the
    flags of positions the writer pinned (shown settled)."""
    if middle is not None:  # infill: only the middle slots are suggestion, the pinned ending is the writer's
        cut, cut_conf = middle_of(text, ids, conf, middle)
        if pinned is not None:  # cut where the finished candidate is cut, or the app finds another text
            flags = pinned[: len(cut)]  # and drops the spans (and the pins) it would carry on from
            cut_conf = [1.0 if i < len(flags) and flags[i] else c for i, c in enumerate(cut_conf)]
            return text.spans(cut, cut_conf, flags)
        return text.spans(cut, cut_conf)
    shown = text.visible_ids([*earlier, *ids][:limit])
    conf = ([1.0] * len(earlier) + conf)[: len(shown)]
    if pinned is not None:  # pinned words are the writer's (or kept) words: shown settled
        conf = [1.0 if p else c for c, p in zip(conf, pinned, strict=False)] + conf[len(pinned) :]
    return text.spans(shown, conf, pinned)


def finished_candidates(
    text: TokenText,
    rows: Sequence[tuple[list[int], list[float]]],
    *,
    pad_id: int,
    wanted: int,
    middles: Sequence[int] | None = None,
    limit: int | None = None,
) -> tuple[Candidate, ...]:
    """The distinct finished alternatives of generated rows (ids and confidences after the prompt), best first
    for an infill (its rows are lengths or seeds), in row order otherwise; a draft or rewrite is cut to the
    `limit` tokens asked for (the model writes whole canvases, so a 32-token request would otherwise come back
    as a 64- or 256-token one)."""
    found = []
    for r, (ids, conf) in enumerate(rows):
        if middles is not None:
            ids, conf = middle_of(text, ids, conf, middles[r])
            shown = ids
        else:
            ids, conf = ids[:limit], conf[:limit]
            while ids and ids[-1] == pad_id:
                ids.pop()
            shown = text.visible_ids(ids)
        score = sum(conf[: len(shown)]) / len(shown) if shown else 0.0
        decoded = text.text(shown)  # the same safe decoding the ghost text showed, so accept = what was seen
        found.append(Candidate(decoded, tuple(ids), score, row=r))
    # Best first, by the score the app shows (mean confidence of the shown tokens), for every task: the badge,
    # Alt+] / Alt+[ and the alternatives panel then share one order and the default ghost is the best.
    found.sort(key=lambda c: c.confidence, reverse=True)
    return tuple(distinct_nonempty(found, wanted=wanted))
