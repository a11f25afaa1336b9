"""Token ids -> text that is always safe to paint, with a confidence per word.

Mid-denoising canvases are full of half-formed things: a Korean syllable whose first two UTF-8 bytes are
byte-fallback tokens and whose third is still noise, an emoji cut in half. Decoding those with the tokenizer
shows U+FFFD boxes that flicker. Here every token maps to its bytes once (cached), bytes go through an
incremental UTF-8 decoder that drops invalid bytes and *holds back an incomplete tail*, and each emitted piece
keeps the confidence of the tokens that produced it. Words get the lowest confidence of their pieces, so a
word is only shown as settled when all of it is.

Rows of ids become the alternatives a writer sees here too (`row_spans`, `finished_candidates`,
`distinct_nonempty`): one place decides what an alternative is, so the ghost text of a step, the finished
result and the list the writer cycles through agree: an infill row's suggestion is its middle up to its first
stop id (the pinned ending is the writer's own text), a draft or rewrite is cut to the tokens asked for, and
an alternative that came out empty or repeats another is not offered unless nothing else is left. Pure Python
over lists (no torch), so whoever holds rows of ids (the session, the tools, a front end) can use it.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from engine.api import Candidate, Span
from engine.special_tokens import ControlGrammar, cut_at_stop, hidden_ids

_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
# Control characters other than newline and tab (noise bytes such as \x02 or ESC) never reach the editor.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffd]")


class TokenText:
    """Maps token ids to their bytes for one tokenizer (SentencePiece "▁" style or byte-level BPE)."""

    def __init__(self, tokenizer: Any, stop_ids: Iterable[int] = ()) -> None:
        self.tokenizer = tokenizer
        self.stop_ids = frozenset(stop_ids)
        # Named specials, every added token marked special (Gemma 4's turn/channel markers live only there)
        # and the stop ids: none of them is ever painted or written (see engine.special_tokens).
        self.special_ids = hidden_ids(tokenizer, self.stop_ids)
        # Control text is hidden as whole spans (a thought channel, a tool call), not marker by marker.
        self.grammar = ControlGrammar(tokenizer, self.special_ids)
        self._bytes: dict[int, bytes] = {}
        # Gemma's vocabulary is SentencePiece-style: "▁" marks a space and <0xNN> pieces carry raw bytes.
        self._sentencepiece = tokenizer.convert_tokens_to_ids("<0x00>") not in (None, tokenizer.unk_token_id)

    def piece_bytes(self, token_id: int) -> bytes:
        cached = self._bytes.get(token_id)
        if cached is not None:
            return cached
        if token_id in self.special_ids:
            piece = b""
        else:
            token = self.tokenizer.convert_ids_to_tokens(int(token_id))
            if token is None:
                piece = b""
            elif match := _BYTE_TOKEN.match(token):
                piece = bytes([int(match.group(1), 16)])
            elif self._sentencepiece:
                piece = token.replace("▁", " ").encode("utf-8")
            else:
                piece = self.tokenizer.convert_tokens_to_string([token]).encode("utf-8")
        self._bytes[token_id] = piece
        return piece

    def visible_ids(self, ids: Sequence[int]) -> list[int]:
        """The ids up to (not including) the first stop token: what the writer would get if it ended now."""
        return cut_at_stop(ids, self.stop_ids)

    def spans(
        self, ids: Sequence[int], confidence: Sequence[float], pinned: Sequence[bool] | None = None
    ) -> tuple[Span, ...]:
        """Word spans of valid text for `ids` (already cut at a stop token), each with its confidence.

        `pinned` marks tokens of a warm canvas that were pinned; a word is split where pinning changes, so a
        pinned span is exactly the pinned text (see `engine.canvas`).
        """
        decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        pieces: list[tuple[str, float, bool, tuple[int, ...]]] = []
        pending_conf = 1.0
        pending_ids: list[int] = []  # tokens whose text has not shown yet (a held-back byte, a control span)
        flags = pinned if pinned is not None else ()
        control = self.grammar.mask(ids, flags)
        for i, (token_id, conf) in enumerate(zip(ids, confidence, strict=False)):
            pending_ids.append(int(token_id))
            if control[i]:
                continue
            pending_conf = min(pending_conf, float(conf))
            text = _CONTROL.sub("", decoder.decode(self.piece_bytes(int(token_id))))
            if text:
                # Pinned as the token that shows it is: a pinned run decodes to exactly its characters on its
                # own, so no character is part pinned; a free token before it that showed nothing (a stray
                # byte, a control byte) made the pinned word's first piece free, and the word split in two.
                pin = i < len(flags) and bool(flags[i])
                pieces.append((text, pending_conf, pin, tuple(pending_ids)))
                pending_conf, pending_ids = 1.0, []
        # No final flush: an incomplete multi-byte tail is held back until its last byte settles.
        return tuple(_words(pieces))

    def text(self, ids: Sequence[int]) -> str:
        return "".join(s.text for s in self.spans(ids, [1.0] * len(ids)))


def _words(pieces: list[tuple[str, float, bool, tuple[int, ...]]]) -> Iterable[Span]:
    """Merge token pieces into words (a word keeps its trailing whitespace), confidence = weakest piece; a
    change between pinned and free pieces also ends a word. A piece's token ids go with the word its first
    character is in."""
    word, conf, pin = "", 1.0, False
    word_ids: tuple[int, ...] = ()
    for text, c, p, piece_ids in pieces:
        for part in re.split(r"(?<=\s)(?=\S)", text):
            if not part:
                continue
            if word and (p != pin or (word[-1].isspace() and not part[0].isspace())):
                yield Span(word, conf, pin, word_ids)
                word, conf, word_ids = "", 1.0, ()
            if not word:
                pin = p
            word += part
            conf = min(conf, c)
            word_ids, piece_ids = word_ids + piece_ids, ()  # the piece's ids go with its first part
    if word:
        yield Span(word, conf, pin, word_ids)


# -- rows of ids -> the alternatives a writer sees ---------------------------------------------------------

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
