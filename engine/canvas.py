"""A warm-started canvas: denoising that starts from text the writer (or an earlier suggestion) already has.

The reference sampler (`DiffusionGemmaGenerationMixin.generate()`) starts every canvas from uniform random
tokens and runs the whole temperature schedule. A diffusion model does not need to: its denoiser reads any
canvas. A `WarmCanvas` says, per canvas position,

- **pinned**: the position holds a known token that is never sampled, accepted, re-noised nor counted by the
  stopping rule, exactly like infill's ending (`engine.infill`); it is merged into the loop's frozen mask, so
  the model's self-conditioning there is a one-hot belief in the pinned token. A pinned token comes back byte
  for byte. So that it cannot be cut off, end-of-text and padding are banned at every free position *before*
  the last pinned one (otherwise the model could end the text in front of a pinned word and EOS padding would
  erase it);
- **noised**: the position starts as uniform noise, like every position of a cold canvas;
- **kept** (neither): the position starts as its given token and is exempt from re-noising: it holds its token
  until the model accepts a sampled token there (the reference's `accept_canvas` without the `renoise_canvas`
  that follows it). The model sees it clean at every step and may revise it; the final text is the argmax
  canvas, as always.

The **noise share** `s` (0..1) is the fraction of the unpinned positions that start as noise, chosen uniformly
at random (from the request's seed, on a generator of its own: the sampler's generators draw exactly what they
draw for a cold canvas). The temperature schedule starts at the matching point: of the `N` steps whose
temperatures run from `t_max` down to `t_min`, only the last `ceil(s * N)` run (at least one), so a light edit
runs few, cool steps and `s = 1` runs the full schedule from a canvas that is all noise but for the pins.
"Rewrite strength" in the editor is this noise share. With `s = 1` and no pins a warm canvas is a cold one:
the loop makes the same draws and returns the same tokens as `generate()` (checked by the tests).

Layout: the given text is tokenized, followed by one end-of-text token and padding to the end of its last
canvas; the tokens after the text are positions like any other (noised or kept), so a warm rewrite can grow or
shrink only by what the model writes in noised positions and by moving its end-of-text; a light edit therefore
changes length little. With `WarmStart.pin_end` the end-of-text and the padding after it are pinned too: the
text keeps its token count and ends exactly where it ended (a re-roll in place whose last word is kept;
without it a noised tail after a pinned last word let the model write on past it, e.g. "sein.ies. eyes up
his…"). Pins are character ranges of the text; each maximal pinned run is tokenized on its own (checked to
decode back to exactly its characters), so pinned tokens never straddle a pin's edge.

A re-roll in place (the app's `reroll_request`) starts from the shown suggestion: with `WarmStart.ids` the
canvas is the very tokens that were shown (`canvas_ids`; re-tokenizing the text can give other, fewer tokens
than the model wrote, and every pin after such a word moved), so each pinned word keeps its token position
and the canvas its length; with `WarmStart.keep_lead` the first position may only hold a token that starts
the text as it started (after a line break, after a space, or glued), and no token that shows nothing (a
special token, a stray byte) that would move the start one position on. Tokens that show nothing are banned
at the glue positions too, and a pinned run that ends in punctuation the text follows with whitespace
("field.") gets the same ban after it as one ending in a letter.

Infill (`infill_plan`): the canvas text is the middle; its token count fixes the middle length (no length
search), its pins are pinned inside the middle, and infill's pinned ending stays where `engine.infill` puts
it; its pinned words get the glue and lead bans of a draft's canvas.

Limits: every row of a batch (the K alternatives) shares the canvas text and pins but draws its own noised
positions (seed, seed+1, ...). The warm canvas covers as many whole canvases as the text needs; blocks after
it start cold. An infill middle must fit in its one canvas with at least one token of the ending.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import torch

from engine.api import EngineError, WarmStart
from engine.lengths import LengthWindow
from engine.special_tokens import hidden_ids, text_ids


class CanvasError(EngineError):
    """The warm canvas cannot be laid out (pins outside the text, a pin that does not tokenize back)."""

    kind = "canvas_error"


@dataclass(frozen=True)
class BlockPlan:
    """The warm start of one canvas (block): tensors of shape [B, L] on the loop's device."""

    ids: torch.Tensor  # long: the given token at every position
    pinned: torch.Tensor  # bool: never resampled
    kept: torch.Tensor  # bool: start as the given token, kept until accepted (`SamplingRule.step`'s `kept`)
    ban: tuple[torch.Tensor, torch.Tensor] | None  # (rows, cols) of free positions before the last pin
    stop_ids: torch.Tensor  # long [S]
    start_step: int  # the schedule runs cur_step = start_step .. 1
    has_pins: bool = False  # decided on the host, so the loop never reads a device tensor for it
    # Bans that keep pinned words whole: (rows, cols, ids) right after a pinned word (tokens that would
    # continue it) and right before one (tokens that end in a letter or digit and would run into it)
    glue: tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], ...] = ()

    def merge_frozen(
        self, fmask: torch.Tensor | None, fids: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The loop's frozen mask and ids with this block's pins added."""
        if not self.has_pins:
            return fmask, fids
        if fmask is None or fids is None:
            return self.pinned, self.ids
        return fmask | self.pinned, torch.where(self.pinned, self.ids, fids)

    def start_canvas(self, canvas: torch.Tensor) -> torch.Tensor:
        """The first decoder input: kept positions hold their token (noise and pins are already in
        `canvas`)."""
        return torch.where(self.kept, self.ids, canvas)

    def suppress_stops(self, processed: torch.Tensor) -> torch.Tensor:
        """Ban end-of-text/padding before the last pin (in place on the step's own tempered logits; the
        indices were found on the host once per canvas, so this adds no synchronisation)."""
        if self.ban is not None:
            rows, cols = self.ban
            processed[rows[:, None], cols[:, None], self.stop_ids[None, :]] = (
                torch.finfo(processed.dtype).min / 2
            )
        for rows, cols, ids in self.glue:  # no letters glued onto a pinned word
            processed[rows[:, None], cols[:, None], ids[None, :]] = torch.finfo(processed.dtype).min / 2
        return processed


@dataclass(frozen=True)
class WarmCanvas:
    """A warm start over the first `ids.shape[1] // L` canvases of a request (host tensors, [B, T])."""

    ids: torch.Tensor
    pinned: torch.Tensor
    noised: torch.Tensor
    noise: float
    stop_ids: tuple[int, ...]
    canvas_length: int
    text_tokens: int  # tokens of the given text (before its end-of-text)
    # The length window (`LengthWindow`): end-of-text is banned before `min_tokens`, and the positions from
    # `tail_from` on are pinned end-of-text/padding (they do not count as a pin the text must reach).
    min_tokens: int = 0
    tail_from: int | None = None
    # Token positions right after / right before a pinned run that ends / starts a word, with the ids banned
    # there.
    glue_after: tuple[int, ...] = ()
    glue_before: tuple[int, ...] = ()
    after_ids: tuple[int, ...] = ()
    before_ids: tuple[int, ...] = ()
    # `WarmStart.keep_lead`: the ids banned at the first position (those that would start the text otherwise
    # than it started: with whitespace where it had none, or the reverse)
    lead_ids: tuple[int, ...] = ()

    @property
    def blocks(self) -> int:
        return self.ids.shape[1] // self.canvas_length

    def first_rows(self, rows: int) -> WarmCanvas:
        """The same warm start for only the first `rows` candidates (when the memory budget runs fewer)."""
        return dataclasses.replace(
            self, ids=self.ids[:rows], pinned=self.pinned[:rows], noised=self.noised[:rows]
        )

    def start_step(self, max_steps: int) -> int:
        return start_step(self.noise, max_steps)

    def block(self, index: int, max_steps: int, device: torch.device) -> BlockPlan | None:
        """The plan of canvas `index`, or None past the warm canvases (those start cold)."""
        if index >= self.blocks:
            return None
        L = self.canvas_length
        sl = slice(index * L, (index + 1) * L)
        pinned = self.pinned[:, sl]  # host tensors: every decision below is made before anything moves
        ban = None
        # No end-of-text before the last pin (the pinned tail of a length window aside), before the last kept
        # token of the given text (an end in an earlier canvas would silently drop kept text of the later
        # ones), nor before the length window's minimum. Per row, as each row keeps its own positions.
        positions = torch.arange(self.ids.shape[1])
        text_pins = self.pinned
        if self.tail_from is not None:
            text_pins = text_pins & (positions < self.tail_from)
        kept_text = ~self.pinned & ~self.noised & (positions < self.text_tokens)
        anchors = text_pins | kept_text
        last = torch.where(anchors, positions, -1).amax(dim=1, keepdim=True)  # [B, 1]; -1: nothing to keep
        last = torch.clamp(last, min=self.min_tokens - 1)
        if bool((last >= 0).any()):
            before = (positions[None, :] <= last)[:, sl] & ~pinned  # the last kept token itself too
            if bool(before.any()):
                rows, cols = before.nonzero(as_tuple=True)
                ban = (rows.to(device), cols.to(device))
        glue = []
        for where, banned in (
            (self.glue_after, self.after_ids),
            (self.glue_before, self.before_ids),
            ((0,), self.lead_ids),
        ):
            local = [p - index * L for p in where if index * L <= p < (index + 1) * L]
            if not local or not banned:
                continue
            cols = torch.tensor(local, dtype=torch.long).repeat(pinned.shape[0])
            rows = torch.arange(pinned.shape[0]).repeat_interleave(len(local))
            free = ~pinned[rows, cols]
            if bool(free.any()):
                glue.append(
                    (
                        rows[free].to(device),
                        cols[free].to(device),
                        torch.tensor(banned, dtype=torch.long, device=device),
                    )
                )
        return BlockPlan(
            glue=tuple(glue),
            ids=self.ids[:, sl].to(device),
            pinned=pinned.to(device),
            kept=(~pinned & ~self.noised[:, sl]).to(device),
            ban=ban,
            stop_ids=torch.tensor(self.stop_ids, dtype=torch.long, device=device),
            start_step=self.start_step(max_steps),
            has_pins=bool(pinned.any()),
        )


def start_step(noise: float, max_steps: int) -> int:
    """Where a canvas with this noise share enters the schedule: the last ceil(noise x N) steps run (>= 1)."""
    return max(1, min(max_steps, math.ceil(noise * max_steps - 1e-9)))


def segment_ids(
    tokenizer: object, text: str, pins: Sequence[tuple[int, int]], decode: object
) -> tuple[list[int], list[bool]]:
    """Token ids of `text` with a pinned flag each: pinned runs are tokenized on their own, so a pin's tokens
    cover exactly its characters. `decode(ids) -> str` is the display decoder, used to check the round
    trip."""
    merged = merge_ranges(pins, len(text))
    ids: list[int] = []
    flags: list[bool] = []
    pos = 0
    for start, end in [*merged, (len(text), len(text))]:
        for piece, pin in ((text[pos:start], False), (text[start:end], True)):
            if not piece:
                continue
            piece_ids = text_ids(tokenizer, piece)  # typed control markers stay text
            if pin and decode(piece_ids) != piece:  # type: ignore[operator]
                raise CanvasError(
                    f"The pinned text {piece!r} does not survive "
                    "tokenization unchanged; pin whole words instead."
                )
            ids.extend(piece_ids)
            flags.extend([pin] * len(piece_ids))
        pos = end
    return ids, flags


def canvas_ids(
    tokenizer: object, warm: WarmStart, decode: Callable[[list[int]], str]
) -> tuple[list[int], list[bool]]:
    """Token ids of a warm start with a pinned flag each: the shown tokens (`WarmStart.ids`) where they decode
    to exactly the text and every pin falls on token edges, else the text tokenized (`segment_ids`)."""
    shown = shown_ids(warm, decode)
    return shown if shown is not None else segment_ids(tokenizer, warm.text, warm.pins, decode)


def shown_ids(warm: WarmStart, decode: Callable[[list[int]], str]) -> tuple[list[int], list[bool]] | None:
    """`warm.ids` with the pinned flag of each (a token is pinned when it lies inside a pin), or None when
    they do not decode to `warm.text` or a pin's edge falls inside a token."""
    ids = [int(i) for i in warm.ids]
    if not ids or decode(ids) != warm.text:
        return None
    flags = [False] * len(ids)
    for start, end in merge_ranges(warm.pins, len(warm.text)):
        first, last = _token_at(ids, start, decode), _token_at(ids, end, decode)
        shows = _token_at(
            ids, start + 1, decode, after=True
        )  # one past the token showing its first character
        if first is None or last is None or shows is None:
            return None
        # Tokens that show nothing (a stray byte) may sit right before the pin: they stay free, unless they
        # begin its first character (the byte-fallback pieces of one character go together).
        chosen = next(
            (k for k in range(shows - 1, first - 1, -1) if decode(ids[k:last]) == warm.text[start:end]),
            None,
        )
        if chosen is None or chosen >= last:
            return None
        flags[chosen:last] = [True] * (last - chosen)
    return ids, flags


def _token_at(
    ids: list[int], char: int, decode: Callable[[list[int]], str], *, after: bool = False
) -> int | None:
    """The first k whose prefix ids[:k] decodes to exactly `char` characters (None: `char` is inside a
    token); with `after`, the first k whose prefix reaches `char` at all. Prefix lengths only grow, so a
    bisection finds it in log(n) decodes."""
    low, high = 0, len(ids)
    while low < high:
        mid = (low + high) // 2
        if len(decode(ids[:mid])) < char:
            low = mid + 1
        else:
            high = mid
    reached = len(decode(ids[:low]))
    if after:
        return low if reached >= char else None
    return low if reached == char else None


def merge_ranges(pins: Sequence[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    """Sorted, merged, validated character ranges (`start < end <= length`)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted((int(s), int(e)) for s, e in pins):
        if not 0 <= start < end <= length:
            raise CanvasError(
                f"The pin {start}..{end} is outside the canvas text "
                f"(0..{length}); give character ranges inside it."
            )
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def plan(
    tokenizer: object,
    warm: WarmStart,
    *,
    rows: int,
    canvas_length: int,
    eos_id: int,
    pad_id: int,
    stop_ids: Sequence[int],
    seed: int,
    decode: Callable[[list[int]], str],
    max_tokens: int | None = None,
    window: LengthWindow | None = None,
) -> WarmCanvas:
    """Lay `warm` out on whole canvases for `rows` batch rows; row r draws its noised positions from seed + r.

    With a `window` the result's length is held inside it (see `LengthWindow`); without one a warm canvas can
    grow into every noised position after its text, up to whole canvases.

    Pinned words stay whole: right after a pin that ends a word the tokens that would continue it are banned
    (a re-roll turned a pinned "water" into "watera"), and right before a pin that starts a word the tokens
    that end in a letter or digit ("andwater"); a pinned run is tokenized on its own, without the space that
    marks a word start, so only such a ban keeps the model from writing into it."""
    ids, flags = canvas_ids(tokenizer, warm, decode)
    glue = _edges(tokenizer, warm, flags, stop_ids)
    if max_tokens is not None and len(ids) + 1 > max_tokens:
        raise CanvasError(
            f"The text to start from takes {len(ids) + 1} tokens, more than the {max_tokens} this request "
            "can write; select less text."
        )
    text_tokens = len(ids)
    if window is not None and not warm.pin_end:
        windowed = _windowed(
            ids,
            flags,
            warm,
            window,
            rows=rows,
            canvas_length=canvas_length,
            eos_id=eos_id,
            pad_id=pad_id,
            stop_ids=stop_ids,
            seed=seed,
        )
        return dataclasses.replace(windowed, **glue)
    total = max(1, math.ceil((text_tokens + 1) / canvas_length)) * canvas_length
    layout = ids + [eos_id] + [pad_id] * (total - text_tokens - 1)
    pin_row = flags + [warm.pin_end] * (total - text_tokens)
    ids_t = torch.tensor([layout] * rows, dtype=torch.long)
    pinned = torch.tensor([pin_row] * rows, dtype=torch.bool)
    noised = _draw_noise(pinned, warm.noise, rows, seed)
    return WarmCanvas(ids_t, pinned, noised, warm.noise, tuple(stop_ids), canvas_length, text_tokens, **glue)


class _Glue(TypedDict):
    """The glue and lead fields of a `WarmCanvas`, passed on as keywords."""

    glue_after: tuple[int, ...]
    glue_before: tuple[int, ...]
    after_ids: tuple[int, ...]
    before_ids: tuple[int, ...]
    lead_ids: tuple[int, ...]


def _edges(tokenizer: object, warm: WarmStart, flags: list[bool], stop_ids: Sequence[int]) -> _Glue:
    """What keeps pinned words whole (`_glue_positions`) and, with `keep_lead`, the text's start as it was.

    A token that shows nothing (`unseen_ids`) is banned at those positions too: it would move the edge one
    position on, where nothing is banned (the tiny model's "<start_of_turn>" right after a pinned " it", then
    "k": " itk"; a "\r" the display drops after a pinned " field.", then "L": "field.L")."""
    after, before = _glue_positions(warm.text, warm.pins, flags)
    lead: tuple[int, ...] = ()
    if warm.keep_lead and warm.text and flags and not flags[0]:
        lead = lead_ids(tokenizer, _lead_kind(warm.text[0]), stop_ids)
    unseen = unseen_ids(tokenizer, stop_ids) if after or before else ()
    return _Glue(
        glue_after=tuple(after),
        glue_before=tuple(before),
        after_ids=tuple(sorted({*continuation_ids(tokenizer), *unseen})) if after else (),
        before_ids=tuple(sorted({*word_end_ids(tokenizer), *unseen})) if before else (),
        lead_ids=lead,
    )


def _lead_kind(ch: str) -> str:
    """How a text starting with `ch` joins what is before it: on a new line, after a space, or glued."""
    if ch in "\n\r\u2028\u2029\u0085":
        return "line"
    if ch.isspace() or ch in "▁Ġ":  # SentencePiece's and byte-level BPE's space markers
        return "space"
    if ch == "Ċ":  # byte-level BPE's newline
        return "line"
    return "glued"


def _piece_lead(piece: object) -> str:
    """`_lead_kind` of a vocabulary piece's first character (a byte-fallback piece: of its byte); "unseen" for
    a piece that shows nothing by itself (empty, a control byte, part of a multi-byte character)."""
    if not isinstance(piece, str) or not piece:
        return "unseen"
    byte = _BYTE_PIECE.fullmatch(piece)
    if byte:
        value = int(byte.group(1), 16)
        if value >= 0x80 or value == 0x7F or (value < 0x20 and value not in (0x09, 0x0A)):
            return "unseen"  # the display drops control bytes but tab and line feed (a "\r" too)
        return _lead_kind(chr(value))
    return _lead_kind(piece[0])


_UNSEEN: dict[tuple[int, tuple[int, ...]], tuple[int, ...]] = {}


def unseen_ids(tokenizer: Any, stop_ids: Sequence[int] = ()) -> tuple[int, ...]:
    """Ids of the tokens that show nothing by themselves (special tokens, control bytes the display drops, a
    part of a multi-byte character), stops aside (a text may end anywhere). Once per tokenizer and stops."""
    stops = tuple(sorted({int(i) for i in stop_ids}))
    key = (id(tokenizer), stops)
    if key not in _UNSEEN:
        pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        hidden = hidden_ids(tokenizer)
        _UNSEEN[key] = tuple(
            i
            for i, piece in enumerate(pieces)
            if i not in stops and (i in hidden or _piece_lead(piece) == "unseen")
        )
    return _UNSEEN[key]


_LEADS: dict[tuple[int, str, tuple[int, ...]], tuple[int, ...]] = {}


def lead_ids(tokenizer: Any, kind: str, stop_ids: Sequence[int] = ()) -> tuple[int, ...]:
    """Ids of the tokens that would start a text otherwise than `kind` (`_lead_kind`), and of those that show
    nothing (special tokens, stops, stray bytes: the text would start at the next position, unchecked):
    banned at the first position of a canvas that keeps its lead. Read from the vocabulary once per
    tokenizer, kind and stops."""
    key = (id(tokenizer), kind, tuple(sorted(int(i) for i in stop_ids)))
    if key not in _LEADS:
        pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        unseen = hidden_ids(tokenizer, key[2])
        _LEADS[key] = tuple(i for i, piece in enumerate(pieces) if i in unseen or _piece_lead(piece) != kind)
    return _LEADS[key]


def _glue_positions(
    text: str, pins: Sequence[tuple[int, int]], flags: list[bool]
) -> tuple[list[int], list[int]]:
    """Token positions right after each pinned run whose text ends a word, and right before each whose text
    starts one: there a token with a letter or digit at that edge would run into the pinned word. A run ends a
    word where its last character is a letter or digit and the text goes on with none, and also where it ends
    in punctuation the text follows with whitespace (or nothing): a re-roll glued "ow" onto a pinned
    "theites." that the shown text followed with a space."""
    ends = [i + 1 for i, flag in enumerate(flags) if flag and (i + 1 == len(flags) or not flags[i + 1])]
    starts = [i - 1 for i, flag in enumerate(flags) if flag and (i == 0 or not flags[i - 1])]
    merged = merge_ranges(pins, len(text))
    after, before = [], []
    for (start, end), end_at, start_at in zip(merged, ends, starts, strict=False):
        last, follows = text[end - 1], text[end] if end < len(text) else ""
        if (last.isalnum() and not follows.isalnum()) or (
            not last.isspace() and (not follows or follows.isspace())
        ):
            after.append(end_at)
        if start_at >= 0 and text[start].isalnum() and (start == 0 or not text[start - 1].isalnum()):
            before.append(start_at)
    return after, before


_CONTINUATIONS: dict[int, tuple[int, ...]] = {}
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _runs_into_a_word(piece: object, side: int) -> bool:
    """Whether a vocabulary piece, at its first (side 0) or last (side -1) character, would join the word next
    to it: a letter or digit there, or a byte-fallback piece (<0x61>) whose byte is a letter or digit, a
    control byte or part of a multi-byte character (the display drops what it cannot show, and the neighbours
    then meet: "at" + <0xAD> + "people" was shown as "atpeople")."""
    if not isinstance(piece, str) or not piece:
        return False
    byte = _BYTE_PIECE.fullmatch(piece)
    if byte:
        value = int(byte.group(1), 16)
        return (
            value >= 0x80
            or chr(value).isalnum()
            or (value < 0x20 and not chr(value).isspace())
            or value == 0x7F
        )
    return piece[side].isalnum()


def continuation_ids(tokenizer: Any) -> tuple[int, ...]:
    """Ids of the tokens that start with a letter or digit (no leading space marker): the ones that glue onto
    the word before them. Read from the vocabulary once per tokenizer."""
    key = id(tokenizer)
    if key not in _CONTINUATIONS:
        pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        _CONTINUATIONS[key] = tuple(i for i, piece in enumerate(pieces) if _runs_into_a_word(piece, 0))
    return _CONTINUATIONS[key]


_WORD_ENDS: dict[int, tuple[int, ...]] = {}


def word_end_ids(tokenizer: Any) -> tuple[int, ...]:
    """Ids of the tokens that end with a letter or digit: the ones that run into a word after them."""
    key = id(tokenizer)
    if key not in _WORD_ENDS:
        pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        _WORD_ENDS[key] = tuple(i for i, piece in enumerate(pieces) if _runs_into_a_word(piece, -1))
    return _WORD_ENDS[key]


def _draw_noise(
    pinned: torch.Tensor, share: float, rows: int, seed: int, forced: torch.Tensor | None = None
) -> torch.Tensor:
    """Which positions start as noise: `share` of the unpinned ones per row (row r from seed + r), plus
    `forced`."""
    noised = torch.zeros_like(pinned)
    free = (~pinned[0]).nonzero().squeeze(1)
    count = round(share * free.numel())
    for r in range(rows):
        g = torch.Generator().manual_seed(seed + r + 0x5EED)
        chosen = free[torch.randperm(free.numel(), generator=g)[:count]]
        noised[r, chosen] = True
    if forced is not None:
        noised |= forced & ~pinned
    return noised


def _windowed(
    ids: list[int],
    flags: list[bool],
    warm: WarmStart,
    window: LengthWindow,
    *,
    rows: int,
    canvas_length: int,
    eos_id: int,
    pad_id: int,
    stop_ids: Sequence[int],
    seed: int,
) -> WarmCanvas:
    """The layout of a warm canvas held to `window`: the text (cut at `high` when it is longer: a shorter
    rewrite), then noise or padding, end-of-text pinned at `high` and padding after it. Where the text must
    end earlier (shorter) its last quarter before `high` starts as noise so the model can close the sentence;
    where it must go on (longer) the positions from the text's end to `low` start as noise."""
    n = len(ids)
    pinned_at = [i for i, flag in enumerate(flags) if flag]
    high = max(window.high, pinned_at[-1] + 2 if pinned_at else 0)  # a pinned word is never cut off
    total = max(1, math.ceil((high + 1) / canvas_length)) * canvas_length
    body = (ids + [eos_id] + [pad_id] * max(0, high - n - 1))[:high]
    layout = body + [eos_id] + [pad_id] * (total - high - 1)
    pin_row = (flags + [False] * high)[:high] + [True] * (total - high)
    pinned = torch.tensor([pin_row] * rows, dtype=torch.bool)
    forced = torch.zeros(total, dtype=torch.bool)
    if n >= high:  # shorter than the selection: let the model end the sentence before the cut
        forced[max(0, high - max(2, high // 4)) : high] = True
    elif n < window.low:  # longer: the old end-of-text and what follows it are noise up to the floor
        forced[n : window.low] = True
    noised = _draw_noise(pinned, warm.noise, rows, seed, forced.expand(rows, total))
    return WarmCanvas(
        torch.tensor([layout] * rows, dtype=torch.long),
        pinned,
        noised,
        warm.noise,
        tuple(stop_ids),
        canvas_length,
        min(n, high),
        min_tokens=window.low,
        tail_from=high,
    )


def infill_plan(
    tokenizer: object,
    warm: WarmStart,
    *,
    frozen_mask: torch.Tensor,
    frozen_ids: torch.Tensor,
    middle_ids: list[int],
    middle_pins: list[bool],
    stop_ids: Sequence[int],
    seed: int,
) -> WarmCanvas:
    """The warm start of an infill canvas laid out by `engine.infill`: `middle_ids` in the middle slots
    (pinned where `middle_pins` says), the ending frozen as infill froze it, the noise share over the other
    free slots."""
    rows, length = frozen_mask.shape
    n = len(middle_ids)
    ids = frozen_ids.clone()
    ids[:, :n] = torch.tensor(middle_ids, dtype=torch.long)
    pinned = torch.zeros(rows, length, dtype=torch.bool)
    pinned[:, :n] = torch.tensor(middle_pins, dtype=torch.bool)
    noised = torch.zeros(rows, length, dtype=torch.bool)
    free = (~pinned[0] & ~frozen_mask[0]).nonzero().squeeze(1)
    count = round(warm.noise * free.numel())
    for r in range(rows):
        g = torch.Generator().manual_seed(seed + r + 0x5EED)
        noised[r, free[torch.randperm(free.numel(), generator=g)[:count]]] = True
    # The middle's pinned words stay whole and its start joins `before` as it did, as in a draft's canvas
    # (without the glue bans a re-rolled infill glued "es," onto a pinned " Atyhe").
    glue = _edges(tokenizer, warm, list(middle_pins), stop_ids)
    return WarmCanvas(ids, pinned, noised, warm.noise, tuple(stop_ids), length, n, **glue)


def cold(warm: WarmStart | None) -> bool:
    """A warm start that changes nothing: all noise, no pins (the loop then runs exactly as `generate()`)."""
    return warm is None or (warm.noise >= 1.0 and not warm.pins and not warm.pin_end)
